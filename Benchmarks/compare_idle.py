"""Idle resident memory of several relay binaries, alternated in one run: each connected to the simulator with one
webhook sink (to a closed port), idle 20 s, then VmRSS. Usage: compare_idle.py SIM-BINARY RELAY-BINARY... ; EXTRA_YAML
adds config lines (a telemetry section, say). Used for the notes of session 20."""
import os, signal, socket, subprocess, sys, time, tempfile, json

SIM = sys.argv[1]
BINS = sys.argv[2:]
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) / 1024
port = free_port()
sim = subprocess.Popen([SIM, "--token", "bench-token", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(2)
results = {b: [] for b in BINS}
for rnd in range(3):
    for b in BINS:
        d = tempfile.mkdtemp()
        cfg = os.path.join(d, "relay.yaml")
        extra = os.environ.get("EXTRA_YAML", "")
        open(cfg, "w").write(f"""store:
  path: {d}/relay.sqlite
{extra}sinks:
  hook:
    type: webhook
    url: http://127.0.0.1:9/closed
rules:
  - name: all
    event: transaction.created
    to: [hook]
""")
        env = dict(os.environ, ALLOWANCE_RELAY_SERVER_URL=f"http://127.0.0.1:{port}", ALLOWANCE_RELAY_SERVER_TOKEN="bench-token")
        p = subprocess.Popen([b, "run", "--config", cfg], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(20)
        results[b].append(rss(p.pid))
        p.send_signal(signal.SIGTERM); p.wait()
sim.kill()
for b, r in results.items():
    print(f"{b}: idle RSS MiB {['%.1f' % x for x in r]}  size {os.path.getsize(b)/1e6:.1f} MB")
