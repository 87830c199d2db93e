"""pysignalr and signalrcore, written by others, connect to our simulator and receive both events.

They witness that the simulator (and the codec it shares with our client) speaks SignalR as others do.
"""

import asyncio
import threading
import time
import urllib.request
from decimal import Decimal

from conftest import TOKEN, post_transaction, stats


def _pysignalr_receives_both_events(simulator, amount, protocol=None):
    """pysignalr connects, a transaction of `amount` is made over REST; returns it and the arguments of both events."""
    from pysignalr.client import SignalRClient

    async def scenario():
        # pysignalr applies access_token_factory to the WebSocket only, not to negotiate: send the header too.
        options = {"protocol": protocol} if protocol else {}
        client = SignalRClient(
            simulator + "/hubs/family",
            access_token_factory=lambda: TOKEN,
            headers={"Authorization": f"Bearer {TOKEN}"},
            **options,
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
        created = await asyncio.to_thread(post_transaction, simulator, amount)
        for _ in range(200):
            if got["TransactionCreated"] and got["BalanceUpdated"]:
                break
            await asyncio.sleep(0.05)
        runner.cancel()
        return created, got

    return asyncio.run(scenario())


def test_pysignalr_receives_transaction_created_and_balance_updated(simulator):
    created, got = _pysignalr_receives_both_events(simulator, "19.99")
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


def _signalrcore_over(simulator, transport):
    """signalrcore over `transport` (JSON): both events arrive, and a hub method answers."""
    from signalrcore.hub_connection_builder import HubConnectionBuilder
    from signalrcore.types import HttpTransportType

    hub = (
        HubConnectionBuilder()
        .with_url(
            simulator + "/hubs/family",
            options={"access_token_factory": lambda: TOKEN, "transport": HttpTransportType(transport)},
        )
        .build()
    )
    opened = threading.Event()
    events: dict[str, list] = {"TransactionCreated": [], "BalanceUpdated": []}
    hub.on_open(opened.set)
    hub.on("TransactionCreated", lambda args: events["TransactionCreated"].append(args))
    hub.on("BalanceUpdated", lambda args: events["BalanceUpdated"].append(args))
    hub.start()
    try:
        assert opened.wait(10), f"signalrcore did not connect over {transport}"
        created = post_transaction(simulator, amount="1.25")
        deadline = time.time() + 10
        while time.time() < deadline and not events["TransactionCreated"]:
            time.sleep(0.05)
        assert events["TransactionCreated"][0][0]["id"] == created["id"]
        # signalrcore's Long Polling handles one message per poll answer and keeps the rest until the next answer
        # comes (the spec allows several per answer; the simulator sends what waits together): each invocation's
        # answer lets out what came before it.
        answers = []
        deadline = time.time() + 10
        while time.time() < deadline and not (answers and events["BalanceUpdated"]):
            hub.send("Add", [2, 40], on_invocation=lambda m: answers.append(m.result))
            time.sleep(0.2)
        assert answers and set(answers) == {42}
        assert Decimal(str(events["BalanceUpdated"][0][1])) == Decimal("26.75")  # 25.50 + 1.25
        client = stats(simulator)["clients"]
        assert len(client) == 1
    finally:
        hub.stop()


def test_signalrcore_over_server_sent_events(simulator):
    _signalrcore_over(simulator, "ServerSentEvents")


def test_signalrcore_over_long_polling(simulator):
    # signalrcore sends its token on negotiate and on sends, not on polls: against a hub with [Authorize] its polls
    # get 401. Many hubs have no [Authorize]; the simulator plays one.
    urllib.request.urlopen(urllib.request.Request(simulator + "/_sim/auth?hub=open", method="POST"), timeout=10).read()
    _signalrcore_over(simulator, "LongPolling")


def test_pysignalr_with_messagepack_reads_the_aspnet_shapes(simulator):
    """pysignalr's MessagePack (not ours) reads what the simulator writes: the transaction keyed by its C# property
    names, money as decimal text, the date a timestamp."""
    from pysignalr.protocol.messagepack import MessagepackProtocol

    created, got = _pysignalr_receives_both_events(simulator, "3.10", MessagepackProtocol())
    tx = got["TransactionCreated"][0][0]
    assert tx["Id"] == created["id"]
    assert tx["Type"] == "Credit" and Decimal(tx["Amount"]) == Decimal("3.10")
    assert hasattr(tx["CreatedAt"], "seconds") or hasattr(tx["CreatedAt"], "year"), f"a timestamp, got {tx['CreatedAt']!r}"
    child_id, balance = got["BalanceUpdated"][0]
    assert child_id == "11111111-1111-4111-8111-111111111111"
    assert isinstance(balance, str) and Decimal(balance) == Decimal("28.60")  # 25.50 + 3.10
