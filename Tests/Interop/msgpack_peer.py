"""Python's msgpack (an implementation nobody here wrote) as the witness for our MessagePack codec.

  pack:   prints one line per case: the hex of msgpack.packb(value) and the JSON our reader must give for it.
  unpack: reads hex lines (what our writer wrote) and prints what msgpack.unpackb makes of each, as JSON.
  hub:    prints hub messages built by hand from HubProtocol.md's arrays, framed with VarInt lengths, as hex, with
          the JSON of what they are.
"""

import base64
import datetime
import json
import sys

import msgpack


def iso(ts: msgpack.Timestamp) -> str:
    whole = datetime.datetime.fromtimestamp(ts.seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    ticks = ts.nanoseconds // 100
    if ticks == 0:
        return whole + "Z"
    return whole + "." + f"{ticks:07d}".rstrip("0") + "Z"


def as_json(value):
    """A value as our reader's JSON: bytes as base64, timestamps as ISO-8601 UTC, non-string keys as their JSON."""
    if isinstance(value, msgpack.Timestamp):
        return iso(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else json.dumps(k)): as_json(v) for k, v in value.items()}
    return value


CASES = [
    0, 1, 127, 128, 255, 256, 65535, 65536, 2**32, 2**63 - 1, 2**64 - 1,
    -1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**63),
    True, False, None, 2.5, -0.125, 1e100,
    "", "a", "x" * 31, "x" * 32, "é" * 200, "y" * 70000,
    b"", b"\x00\x01\x02", bytes(range(256)) * 300,
    [], [1, [2, [3, [4]]]], list(range(20)), list(range(70000)),
    {}, {"a": 1}, {str(i): i for i in range(20)}, {1: "one"},
    msgpack.Timestamp(1795545000), msgpack.Timestamp(1795545000, 123456700), msgpack.Timestamp(-1, 5000000),
    msgpack.Timestamp(2**35, 1),
    {"Id": "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "Amount": "12.50", "CreatedAt": msgpack.Timestamp(1795545000, 500000000)},
]


def frame(body: bytes) -> bytes:
    n = len(body)
    prefix = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        prefix.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(prefix) + body


HUB = [
    ([1, {}, None, "TransactionCreated", [{"Id": "x", "Amount": "1.5"}], []],
     {"type": 1, "target": "TransactionCreated", "arguments": [{"Id": "x", "Amount": "1.5"}]}),
    ([1, {"k": "v"}, "7", "Ask", [1, "two"]], {"type": 1, "invocationId": "7", "target": "Ask", "arguments": [1, "two"], "headers": {"k": "v"}}),
    ([2, {}, "3", 42], {"type": 2, "invocationId": "3", "item": 42}),
    ([3, {}, "3", 3, {"a": [1, 2]}], {"type": 3, "invocationId": "3", "result": {"a": [1, 2]}}),
    ([3, {}, "4", 1, "boom"], {"type": 3, "invocationId": "4", "error": "boom"}),
    ([3, {}, "5", 2], {"type": 3, "invocationId": "5"}),
    ([5, {}, "6"], {"type": 5, "invocationId": "6"}),
    ([6], {"type": 6}),
    ([7, "bye", True], {"type": 7, "error": "bye", "allowReconnect": True}),
    ([7, None], {"type": 7}),
    ([8, 1234567], {"type": 8, "sequenceId": 1234567}),
    ([9, 1], {"type": 9, "sequenceId": 1}),
]


def main() -> None:
    mode = sys.argv[1]
    if mode == "pack":
        for value in CASES:
            print(msgpack.packb(value, use_bin_type=True).hex(), json.dumps(as_json(value)))
    elif mode == "unpack":
        for line in sys.stdin:
            line = line.strip()
            if line:
                print(json.dumps(as_json(msgpack.unpackb(bytes.fromhex(line), raw=False, strict_map_key=False))))
    elif mode == "hub":
        for array, meaning in HUB:
            print(frame(msgpack.packb(array, use_bin_type=True)).hex(), json.dumps(meaning))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
