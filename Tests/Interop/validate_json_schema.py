"""Validates JSON documents against a JSON Schema with the reference validator (PyPI `jsonschema`).

argv[1]: the schema file. stdin: one JSON document per line.
Prints "ok" or "bad: <path>: <reason>" per line; exits 0 only when every document is valid.
"""
import json
import sys

from jsonschema import Draft202012Validator, FormatChecker

with open(sys.argv[1]) as f:
    schema = json.load(f)
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema, format_checker=FormatChecker())
failed = 0
for line in sys.stdin:
    if not line.strip():
        continue
    errors = sorted(validator.iter_errors(json.loads(line)), key=lambda e: list(e.absolute_path))
    if errors:
        failed += 1
        print("bad: " + "; ".join(f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors))
    else:
        print("ok")
sys.exit(1 if failed else 0)
