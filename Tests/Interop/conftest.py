"""Starts the real allowance-hub-sim binary for the interop tests."""

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "interop-token"


def _binary(name: str) -> str:
    explicit = os.environ.get("ALLOWANCE_BIN_DIR")
    path = Path(explicit) / name if explicit else ROOT / ".build" / "debug" / name
    if not path.exists():
        pytest.fail(f"{path} does not exist: run `swift build` first (make test does)")
    return str(path)


@pytest.fixture()
def simulator():
    """The simulator on a free loopback port; yields its base URL."""
    proc = subprocess.Popen(
        [_binary("allowance-hub-sim"), "--port", "0", "--token", TOKEN, "--log-level", "warning"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("listening "), f"unexpected first line: {line!r}"
    yield line.split(" ", 1)[1]
    proc.terminate()
    proc.wait(timeout=10)


def post_transaction(base: str, amount: str = "19.99", kind: str = "Credit") -> dict:
    body = (
        '{"childId":"11111111-1111-4111-8111-111111111111","amount":%s,"type":"%s","description":"Interop"}'
        % (amount, kind)
    )
    req = urllib.request.Request(
        base + "/api/v1/transactions",
        data=body.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def stats(base: str) -> dict:
    with urllib.request.urlopen(base + "/_sim/stats", timeout=10) as r:
        return json.loads(r.read())
