#!/usr/bin/env bash
# The release build, the one every release binary comes from: `make bench` measures it, `make deb` and install.sh
# ship it. `swift build -c release` with cross-module optimisation, which lets the compiler inline and specialise
# across the package's modules and its dependencies: about 5% less CPU a soak transaction and 7% less in a blast, in
# alternating pairs of the relay alone (BENCHMARKS.md, session 66).
# Arguments go to `swift build`:
#   deploy/build-release.sh [--product allowance-relay] [--static-swift-stdlib]
# SWIFT=path picks the toolchain's swift (default: the one on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${SWIFT:-swift}" build -c release -Xswiftc -cross-module-optimization "$@"
