#!/usr/bin/env bash
# The relay on a parent's desktop at rest: a private headless desktop (Tests/Desktop/desktop-session.sh: Xvfb, a
# session bus, dunst), the hub simulator, and the relay with one desktop sink. One transaction shows a popup (so the
# bus connection and its listener exist), PRE seconds pass, then each thread's context switches (voluntary and not,
# /proc/PID/task/*/status) are counted over SECONDS.
#   Benchmarks/desktop_idle.sh BIN_DIR [SECONDS] [PRE]     BIN_DIR holds allowance-relay and allowance-hub-sim
set -euo pipefail
BIN=$1 SECS=${2:-60} PRE=${3:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d)
cleanup() {
  [ -n "${R:-}" ] && kill -TERM "$R" 2>/dev/null && wait "$R" 2>/dev/null || true
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null || true
  "$root/Tests/Desktop/desktop-session.sh" stop "$D/session" >/dev/null 2>&1 || true
  rm -rf "$D"
}
trap cleanup EXIT
eval "$("$root/Tests/Desktop/desktop-session.sh" start "$D/session" | sed 's/^/export /')"
"$BIN/allowance-hub-sim" --port 0 --token bench-token >"$D/sim.out" 2>"$D/sim.err" &
SIM=$!
for _ in $(seq 100); do grep -q '^listening' "$D/sim.out" && break; sleep 0.1; done
URL=$(sed -n 's/^listening //p' "$D/sim.out")
printf 'sinks:\n  popups:\n    type: desktop\n' >"$D/relay.yaml"
ALLOWANCE_RELAY_SERVER_URL=$URL ALLOWANCE_RELAY_SERVER_TOKEN=bench-token ALLOWANCE_RELAY_STORE_PATH=$D/relay.sqlite \
  "$BIN/allowance-relay" run --config "$D/relay.yaml" >"$D/relay.out" 2>&1 &
R=$!
for _ in $(seq 100); do grep -q 'caught up' "$D/relay.out" && break; sleep 0.1; done
curl -s -X POST "$URL/_sim/burst?count=1" >/dev/null
for _ in $(seq 100); do grep -q 'delivered transaction.created to popups' "$D/relay.out" && break; sleep 0.1; done
sleep "$PRE"
snap() {
  for t in /proc/$R/task/*; do
    echo "$(basename "$t") $(cat "$t/comm") $(awk '/^(non)?voluntary_ctxt_switches/ {s += $2} END {print s}' "$t/status")"
  done | sort
}
snap >"$D/a"
sleep "$SECS"
snap >"$D/b"
echo "context switches of each thread in $SECS s at rest (a popup shown $PRE s before):"
join "$D/a" "$D/b" | awk '{n[$2] += $5 - $3} END {for (k in n) if (n[k] > 0) printf "  %-16s %d\n", k, n[k]}' | sort
