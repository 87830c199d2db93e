"""pysignalr and signalrcore, written by others, connect to our simulator and receive both events.

They witness that the simulator (and the codec it shares with our client) speaks SignalR as others do.
"""

import asyncio
import threading
import time
from decimal import Decimal

from conftest import TOKEN, post_transaction, stats


def test_pysignalr_receives_transaction_created_and_balance_updated(simulator):
    from pysignalr.client import SignalRClient

    async def scenario():
        # pysignalr applies access_token_factory to the WebSocket only, not to negotiate: send the header too.
        client = SignalRClient(
            simulator + "/hubs/family",
            access_token_factory=lambda: TOKEN,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        got: dict[str, list] = {"TransactionCreated": [], "BalanceUpdated": []}
        opened = asyncio.Event()

        async def on_open() -> None:
            opened.set()

        async def on_tx(args) -> None:
            got["TransactionCreated"].append(args)

        async def on_balance(args) -> None:
            got["BalanceUpdated"].append(args)

        client.on_open(on_open)
        client.on("TransactionCreated", on_tx)
        client.on("BalanceUpdated", on_balance)
        runner = asyncio.create_task(client.run())
        await asyncio.wait_for(opened.wait(), 10)
        created = await asyncio.to_thread(post_transaction, simulator)
        for _ in range(200):
            if got["TransactionCreated"] and got["BalanceUpdated"]:
                break
            await asyncio.sleep(0.05)
        runner.cancel()
        return created, got

    created, got = asyncio.run(scenario())
    tx = got["TransactionCreated"][0][0]
    assert tx["id"] == created["id"]
    assert tx["type"] == "Credit" and tx["description"] == "Interop"
    child_id, balance = got["BalanceUpdated"][0]
    assert child_id == "11111111-1111-4111-8111-111111111111"
    assert Decimal(str(balance)) == Decimal("45.49")  # 25.50 + 19.99


def test_signalrcore_receives_both_events_and_invokes_a_hub_method(simulator):
    from signalrcore.hub_connection_builder import HubConnectionBuilder

    hub = (
        HubConnectionBuilder()
        .with_url(simulator + "/hubs/family", options={"access_token_factory": lambda: TOKEN})
        .build()
    )
    opened = threading.Event()
    events: dict[str, list] = {"TransactionCreated": [], "BalanceUpdated": []}
    hub.on_open(opened.set)
    hub.on("TransactionCreated", lambda args: events["TransactionCreated"].append(args))
    hub.on("BalanceUpdated", lambda args: events["BalanceUpdated"].append(args))
    hub.start()
    try:
        assert opened.wait(10), "signalrcore did not connect"
        created = post_transaction(simulator, amount="2.50", kind="Debit")
        deadline = time.time() + 10
        while time.time() < deadline and not (events["TransactionCreated"] and events["BalanceUpdated"]):
            time.sleep(0.05)
        assert events["TransactionCreated"][0][0]["id"] == created["id"]
        assert Decimal(str(events["BalanceUpdated"][0][1])) == Decimal("23.00")  # 25.50 - 2.50
        assert stats(simulator)["connections"] == 1
    finally:
        hub.stop()
