#!/usr/bin/env bash
# After a failed `swift test`: repeat its failures at the end of the output, where a CI log's tail shows them
# (the run prints several thousand lines, and the first failure can be far above the last).
log=${1:?usage: failures.sh SWIFT-TEST-LOG}
echo
echo "==== the failures of this run ($log) ===="
# Swift Testing marks a failure with ✘ and its details with ↳ on the lines after it; a crash leaves a
# "Fatal error" or a signal. The suites run side by side, so other tests' lines can sit between them.
awk '/^✘|Fatal error|exited with signal|unexpected signal|: error: /{print; detail=1; next}
     detail && /^[[:space:]]*↳/{print; next}
     {detail=0}' "$log" | head -200
# A crash: the crashed thread's frames (Swift's backtracer prints them first, far above the end of the log).
awk '/\*\*\* Program crashed/{show=1; n=0} show{print; if (++n >= 45) show=0}' "$log" | head -100
