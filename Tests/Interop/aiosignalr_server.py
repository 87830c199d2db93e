"""An aiosignalr hub (a server nobody here wrote) for our client's interop test.

Prints `listening http://127.0.0.1:PORT/hub`, then serves until killed. aiosignalr sends JSON in Binary
frames, drops anything sent from on_connected (it runs before the handshake), so events are sent
when the client invokes `Start`, and returns a result only from methods with a return annotation.
"""

import asyncio
import sys

from aiosignalr.server import Hub
from aiosignalr.server.server import SignalRServer


class FamilyHub(Hub):
    async def start(self, count: int) -> int:
        for i in range(count):
            await self.clients.caller.send(
                "TransactionCreated",
                {
                    "id": f"00000000-0000-4000-8000-{i:012d}",
                    "childId": "11111111-1111-4111-8111-111111111111",
                    "amount": 1.25,
                    "type": "Credit",
                    "description": f"from aiosignalr {i}",
                    "balanceAfter": 26.75,
                    "createdAt": "2026-11-22T10:00:00Z",
                    "createdByName": "aiosignalr",
                },
            )
            await self.clients.caller.send("BalanceUpdated", "11111111-1111-4111-8111-111111111111", 26.75)
        return count

    async def echo(self, value: str) -> str:  # aiosignalr sends a result only for annotated returns
        return value


async def main() -> None:
    server = SignalRServer(FamilyHub)
    host, port = await server.serve("127.0.0.1", 0, path="/hub")
    print(f"listening http://{host}:{port}/hub", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
