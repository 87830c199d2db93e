"""An HTTP proxy that only tunnels (CONNECT), as corporate proxies do, and writes each tunnel's target to a log.

Usage: connect_proxy.py LOGFILE. Prints `listening PORT`, runs until killed. Anything but CONNECT gets 405.
"""

import asyncio
import sys

from byte_pipe import pipe


async def main(log_path: str) -> None:
    log = open(log_path, "a", buffering=1)

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            log.write(f"refused {method} {target}\n")
            return
        host, port = target.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        log.write(f"CONNECT {target}\n")
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
