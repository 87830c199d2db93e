#!/usr/bin/env python3
"""Turns the fault scenarios' figures (one JSON line per run, written by the tests through
TestSupport/ReliabilityFigures.swift) into RELIABILITY.md's "figures of the last run" section.

    Tests/reliability_report.py FIGURES.jsonl RELIABILITY.md [--check]

--check: exit 1 if any run lost an event or an alert or had a wrong balance (the tests assert the same and
more; this guards the report)."""
import json
import platform
import subprocess
import sys
from collections import OrderedDict

BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
MAIN = ["kills", "events", "alerts", "lost_events", "lost_alerts", "wrong_balances", "repeats"]


def main() -> int:
    figures_path, doc_path = sys.argv[1], sys.argv[2]
    runs = [json.loads(line) for line in open(figures_path) if line.strip()]
    if not runs:
        print(f"no figures in {figures_path}: run the scenarios first (make reliability)", file=sys.stderr)
        return 1
    by_scenario: "OrderedDict[str, list]" = OrderedDict()
    for r in runs:
        by_scenario.setdefault(r["scenario"], []).append(r)

    def total(key, rs):
        return sum(r.get(key, 0) for r in rs)

    rows, hostile = [], []
    for name, rs in by_scenario.items():
        if name.startswith("hostile frame: "):
            hostile.append(f"| {name[len('hostile frame: '):]} | {max(r['log_lines'] for r in rs)} | "
                           f"{max(r['peak_kb'] for r in rs) / 1024:.0f} MB |")
            continue
        # Other figures: the largest of the runs (a count per run, a memory peak...).
        other = sorted({k for r in rs for k in r} - set(MAIN) - {"scenario", "at", "requests"})
        # Requests at the receiver beyond one per alert (retries answered 429/500...); repeats are counted apart.
        if any(r.get("requests", 0) > r.get("alerts", 0) + r.get("repeats", 0) for r in rs):
            other.append("requests")
        notes = ", ".join(f"{k.removesuffix('_kb')} {max(r.get(k, 0) for r in rs) / 1024:.0f} MB" if k.endswith("_kb")
                          else f"{k} {max(r.get(k, 0) for r in rs)}" for k in other)
        rows.append([name, str(len(rs))] + [str(total(k, rs)) if any(k in r for r in rs) else "" for k in MAIN] + [notes])
    checked = [r for r in runs if "events" in r]
    lost = sum(total(k, runs) for k in ["lost_events", "lost_alerts", "wrong_balances"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    first, last = min(r["at"] for r in runs), max(r["at"] for r in runs)
    lines = [
        BEGIN,
        f"From `make reliability` at commit `{commit}`, {first} to {last}, on {platform.machine()} "
        f"({subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores). "
        f"Regenerated from `.build/test-artifacts/reliability.jsonl`; do not edit by hand.",
        "",
        f"**{len(rows)} scenarios, {len(checked)} runs, {total('kills', runs)} kills survived, "
        f"{total('events', runs)} events and {total('alerts', runs)} alerts checked, lost = {lost}, "
        f"repeats = {total('repeats', runs)}** (each repeat is an alert whose outcome was not yet written at a kill (at most a sink's concurrency per kill), sent again with the "
        "same `webhook-id`: a receiver that dedups on it sees it once).",
        "",
        "| scenario | runs | kills | events | alerts | lost events | lost alerts | wrong balances | repeats | other figures (largest run) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ] + ["| " + " | ".join(r) + " |" for r in rows]
    if hostile:
        lines += ["", "Hostile frames through the relay binary, one after another on one connection: warning and error "
                  "lines each caused, and the relay's peak resident memory (VmHWM) after it.", "",
                  "| frame | log lines | peak memory |", "|---|---|---|"] + hostile
    lines.append(END)
    doc = open(doc_path).read()
    if BEGIN not in doc or END not in doc:
        print(f"{doc_path} has no {BEGIN} ... {END} section", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    open(doc_path, "w").write(head + "\n".join(lines) + tail)
    print(f"{doc_path}: {len(rows)} scenarios, {len(checked)} runs, lost = {lost}")
    return 1 if "--check" in sys.argv and lost else 0


if __name__ == "__main__":
    sys.exit(main())
