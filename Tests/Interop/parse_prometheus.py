"""Parses Prometheus text exposition with the reference parser (PyPI `prometheus-client`).

stdin: the body of a /metrics answer. Prints one line per sample, "name{label=value,...} value", sorted;
exits 1 with the parser's error when the text is not valid exposition format.
"""
import sys

from prometheus_client.parser import text_string_to_metric_families

try:
    lines = []
    for family in text_string_to_metric_families(sys.stdin.read()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            lines.append(f"{s.name}{{{labels}}} {s.value}")
except Exception as e:  # the parser raises ValueError on bad input
    print(f"bad: {e}")
    sys.exit(1)
print("\n".join(sorted(lines)))
