"""A real Matrix homeserver for the Matrix sink's tests: Synapse (matrix-synapse from PyPI) on a loopback port.

Usage: synapse_homeserver.py DIR. Generates a config in DIR (SQLite, no federation listener, rate limits raised so a
burst of edits is not throttled), starts Synapse, registers two users with the shared secret (`relay`, who posts,
and `mum`, who reads and redacts: a trusted private chat makes her an admin of it), makes a room they share, then prints
`listening BASE RELAY_TOKEN MUM_TOKEN ROOM_ID` and runs until killed (Synapse with it).
"""

import ctypes
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, method: str, path: str, body=None, token: str | None = None) -> dict:
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"{}")


def register(base: str, secret: str, user: str) -> str:
    nonce = call(base, "GET", "/_synapse/admin/v1/register")["nonce"]
    mac = hmac.new(secret.encode(), f"{nonce}\0{user}\0{user}-password\0notadmin".encode(), hashlib.sha1).hexdigest()
    body = {"nonce": nonce, "username": user, "password": f"{user}-password", "admin": False, "mac": mac}
    return call(base, "POST", "/_synapse/admin/v1/register", body)["access_token"]


def main(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    config = os.path.join(folder, "homeserver.yaml")
    python = sys.executable
    subprocess.run(
        [python, "-m", "synapse.app.homeserver", "--server-name", "localhost", "--config-path", config,
         "--data-directory", folder, "--generate-config", "--report-stats=no"],
        check=True, stdout=subprocess.DEVNULL, cwd=folder)
    port = free_port()
    secret = "relay-tests-shared-secret"
    with open(config) as f:
        text = f.read()
    text = text.replace("port: 8008", f"port: {port}").replace("      - federation\n", "")
    text = "\n".join(line for line in text.splitlines() if not line.startswith(("registration_shared_secret:", "trusted_key_servers:", "  - server_name:")))
    text += f"""
registration_shared_secret: "{secret}"
trusted_key_servers: []
suppress_key_server_warning: true
rc_message:
  per_second: 1000
  burst_count: 1000
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
"""
    with open(config, "w") as f:
        f.write(text)
    # Synapse ends with this script, however it ends (the tests SIGKILL their peers): the kernel tells it.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    server = subprocess.Popen(
        [python, "-m", "synapse.app.homeserver", "--config-path", config], cwd=folder,
        stdout=open(os.path.join(folder, "stdout.log"), "w"), stderr=subprocess.STDOUT,
        preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGTERM, lambda *_: (server.terminate(), sys.exit(0)))
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            call(base, "GET", "/_matrix/client/versions")
            break
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                sys.exit(f"synapse did not start: see {folder}/stdout.log")
            time.sleep(0.2)
    relay = register(base, secret, "relay")
    mum = register(base, secret, "mum")
    room = call(base, "POST", "/_matrix/client/v3/createRoom", {"preset": "trusted_private_chat", "invite": ["@mum:localhost"]}, relay)["room_id"]
    call(base, "POST", f"/_matrix/client/v3/join/{urllib.parse.quote(room)}", {}, mum)
    print(f"listening {base} {relay} {mum} {room}", flush=True)
    try:
        server.wait()
    finally:
        server.terminate()


if __name__ == "__main__":
    main(sys.argv[1])
