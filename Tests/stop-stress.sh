#!/usr/bin/env bash
# The relay's start/stop suites again and again, to catch a rare crash at a graceful stop (issue 30: a double free
# seen as signal 6 while the relay thread exits: two relays in five runs of these suites, with the receive loop on
# the connection's loop; the cause was OpenSSL's clean-up at exit, RELIABILITY.md). Runs a copy of the built test
# binaries, so that `swift build` may go on meanwhile; core dumps on (root sets core_pattern to CORES), and a relay
# that ended with signal 6 is counted per run.
#   Tests/stop-stress.sh [RUNS] [CORES]      (after `swift build --build-tests`)
# BUILD=.build-address/debug for the AddressSanitizer build (`make sanitize`'s): its reports go to CORES/asan.*.
set -u
runs=${1:-5}
cores=${2:-/tmp/cores}
bin=$(mktemp -d /tmp/stop-stress.XXXX)
build=${BUILD:-.build/debug}
cp -L "$build"/allowance-relayPackageTests.xctest "$build"/allowance-relay "$build"/allowance-hub-sim "$bin/"
mkdir -p "$cores"
[ "$(id -u)" -eq 0 ] && echo "$cores/core.%e.%p" > /proc/sys/kernel/core_pattern
ulimit -c unlimited
export ASAN_OPTIONS=${ASAN_OPTIONS:-log_path=$cores/asan:detect_leaks=0}
for i in $(seq 1 "$runs"); do
  log="$bin/run-$i.log"
  SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=4 "$bin/allowance-relayPackageTests.xctest" --testing-library swift-testing \
    --filter "ReliabilityTests|RelayEndToEndTests" > "$log" 2>&1
  echo "run $i: exit $?, $(grep -c '^✔ Test' "$log") passed, $(grep -c '^✘ Test.*failed' "$log") failed," \
    "$(grep -c 'status → 6' "$log") relay(s) ended by signal 6; log $log"
done
echo "cores: $(ls "$cores" 2>/dev/null | wc -l) in $cores (gdb -batch -ex bt $bin/allowance-relay CORE)"
