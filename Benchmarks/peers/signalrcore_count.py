"""Throughput peer: signalrcore (PyPI) receives and counts TransactionCreated and BalanceUpdated, nothing else.

    signalrcore_count.py BASE_URL TOKEN COUNT
Prints "connected", then {"events":N,"seconds":S} (first to last event), then stays connected until killed.
"""
import json
import logging
import sys
import threading
import time

from signalrcore.hub_connection_builder import HubConnectionBuilder

base, token, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
state = {"n": 0, "first": 0.0}
lock = threading.Lock()


def on_event(_args) -> None:
    with lock:
        if state["n"] == 0:
            state["first"] = time.monotonic()
        state["n"] += 1
        if state["n"] == target:
            print(json.dumps({"events": state["n"], "seconds": time.monotonic() - state["first"]}), flush=True)


hub = (
    HubConnectionBuilder()
    .with_url(base + "/hubs/family", options={"access_token_factory": lambda: token})
    .configure_logging(logging.CRITICAL)
    .build()
)
hub.on_open(lambda: print("connected", flush=True))
hub.on("TransactionCreated", on_event)
hub.on("BalanceUpdated", on_event)
hub.start()
threading.Event().wait()
