#!/usr/bin/env bash
# The HTTP client comparison recorded in BENCHMARKS.md ("The HTTP client"): the relay's libcurl client
# (Sources/HTTPTransport, linked here as it is) against AsyncHTTPClient, each posting webhook-sized bodies to
# peers/fast_receiver.py at 1, 4 and 16 requests at once, and each built from scratch to time its build.
set -euo pipefail
cd "$(dirname "$0")"
python="${PYTHON:-../../.venv/bin/python}"
out=$(mktemp)
$python ../peers/fast_receiver.py > "$out" & receiver=$!
trap 'kill $receiver; rm -f "$out"' EXIT
for i in $(seq 50); do grep -q listening "$out" 2>/dev/null && break; sleep 0.1; done
port=$(awk '{print $2}' "$out")
rm -rf .build-curl .build-ahc
swift package resolve >/dev/null
for product in curlbench ahcbench; do
  start=$(date +%s.%N)
  swift build -c release --product $product --scratch-path .build-${product%bench} >/dev/null
  echo "{\"build\":\"$product\",\"seconds_from_scratch\":$(echo "$(date +%s.%N) - $start" | bc)}"
done
for c in 1 4 16; do
  .build-curl/release/curlbench "http://127.0.0.1:$port/hook" 20000 $c
  .build-ahc/release/ahcbench "http://127.0.0.1:$port/hook" 20000 $c
done
