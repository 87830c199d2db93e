"""A wss:// echo server (Python websockets) for the transport's TLS tests.

Usage: tls_echo_server.py CERT KEY. Prints `listening PORT`, echoes every message, runs until killed.
"""

import asyncio
import ssl
import sys

import websockets


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def main(cert: str, key: str) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    async with websockets.serve(echo, "127.0.0.1", 0, ssl=context) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening {port}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
