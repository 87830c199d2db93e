"""A TLS front for the simulator: terminates TLS with the given certificate and pipes the bytes to a plain port.

Usage: tls_front.py CERT KEY UPSTREAM_PORT. Listens on localhost (IPv4 and IPv6), prints `listening PORT`, runs until
killed. Whatever goes through (negotiate, WebSocket upgrades, event streams, polls) passes unchanged.
"""

import asyncio
import ssl
import sys

from byte_pipe import pipe


async def main(cert: str, key: str, upstream: int) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    # One port on both loopback addresses: a client may resolve localhost to either.
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        await asyncio.start_server(handle, "::1", port, ssl=context)
    except OSError:
        pass
    print(f"listening {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
