"""A webhook receiver fast enough not to be the bottleneck: asyncio with a hand-rolled HTTP/1.1 reader (keep-alive,
Content-Length bodies), answering 204 at once. http.server tops out near 2,000 requests/s on this machine; this one
takes well over 10,000 on one core.

Usage: fast_receiver.py [--port N]  (prints "listening PORT", then on SIGTERM/stdin close nothing more)
Used from bench.py in-process (Receiver) and by hand for the HTTP client comparison.
"""
import asyncio
import json
import time


class WebhookProtocol(asyncio.Protocol):
    def __init__(self, on_body):
        self.on_body = on_body
        self.buffer = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:stop if stop >= 0 else len(head)].strip())
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            self.on_body(body)
            self.transport.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")


class FastReceiver:
    """Counts requests and notes when each transaction's alert first arrived (time.time())."""

    def __init__(self):
        self.arrivals = {}
        self.count = 0

    def on_body(self, body):
        self.count += 1
        now = time.time()
        try:
            tx = json.loads(body)["data"]["transaction"]["id"]
            self.arrivals.setdefault(tx, now)
        except (KeyError, ValueError, TypeError):
            pass

    async def serve(self, port=0):
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: WebhookProtocol(self.on_body), "127.0.0.1", port)
        return self.server.sockets[0].getsockname()[1]


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    async def main():
        r = FastReceiver()
        port = await r.serve(args.port)
        print(f"listening {port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
