"""Throughput peer: pysignalr (PyPI) receives and counts TransactionCreated and BalanceUpdated, nothing else.

    pysignalr_count.py BASE_URL TOKEN COUNT [messagepack]
Prints "connected", then {"events":N,"seconds":S} (first to last event), then stays connected until killed.
"""
import asyncio
import json
import sys
import time

from pysignalr.client import SignalRClient

base, token, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
messagepack = sys.argv[4:] == ["messagepack"]


async def main() -> None:
    # pysignalr applies access_token_factory to the WebSocket only, not to negotiate: send the header too.
    protocol = {}
    if messagepack:
        from pysignalr.protocol.messagepack import MessagepackProtocol

        protocol = {"protocol": MessagepackProtocol()}
    client = SignalRClient(
        base + "/hubs/family", access_token_factory=lambda: token, headers={"Authorization": f"Bearer {token}"}, **protocol
    )
    state = {"n": 0, "first": 0.0}

    async def on_open() -> None:
        print("connected", flush=True)

    async def on_event(args) -> None:
        if state["n"] == 0:
            state["first"] = time.monotonic()
        state["n"] += 1
        if state["n"] == target:
            print(json.dumps({"events": state["n"], "seconds": time.monotonic() - state["first"]}), flush=True)

    client.on_open(on_open)
    client.on("TransactionCreated", on_event)
    client.on("BalanceUpdated", on_event)
    await client.run()


asyncio.run(main())
