"""Verifies Standard Webhooks signatures with the reference implementation (PyPI `standardwebhooks`).

stdin: one JSON object per line: {"secret": "whsec_...", "headers": {...}, "body": "<raw body>"}.
Prints "ok" or "bad: <reason>" per line; exits 0 only when every line verified.
"""
import json
import sys

from standardwebhooks.webhooks import Webhook

failed = 0
for line in sys.stdin:
    if not line.strip():
        continue
    item = json.loads(line)
    try:
        Webhook(item["secret"]).verify(item["body"], item["headers"])
        print("ok")
    except Exception as e:  # the library raises WebhookVerificationError
        failed += 1
        print(f"bad: {e}")
sys.exit(1 if failed else 0)
