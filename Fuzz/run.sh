#!/usr/bin/env bash
# libFuzzer over the SignalR protocol code (Sources/SignalRProtocol and the JSON of Sources/Core: pure, no I/O),
# with AddressSanitizer.
#   Fuzz/run.sh [SECONDS_EACH] [TARGET ...]     targets: hub messagepack negotiate handshake config (default: all, 60 s each)
# Each protocol harness is compiled together with the module's sources (swiftc -sanitize=fuzzer,address) and
# started from Fuzz/seeds/<target> (protocol vectors). The config harness needs Yams and the Relay module, so
# SwiftPM builds it (ALLOWANCE_FUZZ=1 adds its target; .build-fuzz, release, the first build takes minutes) and
# it starts from the example files in config/. What a target finds new goes to .build/fuzz/<target>/corpus, and
# a crash leaves crash-* there, with the input that caused it. Exit 1 when any target crashed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(hub messagepack negotiate handshake config)
failed=0
for t in "${targets[@]}"; do
  out="$repo/.build/fuzz/$t"
  mkdir -p "$out/corpus"
  seeds="$here/seeds/$t"
  if [ "$t" = config ]; then
    (cd "$repo" && ALLOWANCE_FUZZ=1 swift build --scratch-path .build-fuzz -c release \
      -Xswiftc -sanitize=fuzzer,address --product fuzz-config 2>&1 | grep -E "error|Compiling fuzz|Build complete" || true)
    cp "$repo/.build-fuzz/release/fuzz-config" "$out/fuzz-config"
    seeds="$repo/config"
  else
    # The codec and the JSON it reads (Core) as one module; its file that re-exports Core is left out.
    codec=("$repo"/Sources/Core/*.swift)
    for f in "$repo"/Sources/SignalRProtocol/*.swift; do [ "$(basename "$f")" = Exports.swift ] || codec+=("$f"); done
    swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name SignalRProtocol -package-name allowance_relay \
      "${codec[@]}" "$here/harnesses/$t.swift" -o "$out/fuzz-$t" 2>&1 | grep -v "ld.gold: warning" || true
  fi
  echo "fuzzing $t for $seconds s"
  if ! (cd "$out" && ./"fuzz-$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
        corpus "$seeds" >"$out/log" 2>&1); then
    echo "FAIL: $t crashed; the input is in $out (crash-*), the log in $out/log"
    tail -30 "$out/log"
    failed=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/log" | tr '\n' ' '
    echo
  fi
done
exit $failed
