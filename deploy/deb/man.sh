#!/usr/bin/env bash
# Writes allowance-relay's man pages, allowance-relay.1 and one per subcommand (allowance-relay.run.1, ...), gzipped,
# from the binary's own argument parser, with swift-argument-parser's generate-manual tool (built into .build/tools).
#   deploy/deb/man.sh BINARY DIR
set -euo pipefail
binary=$(realpath "${1:?man.sh BINARY DIR}")
dir=$(realpath -m "${2:?man.sh BINARY DIR}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
parser="$repo/.build/checkouts/swift-argument-parser"
[ -d "$parser" ] || (cd "$repo" && swift package resolve >/dev/null)
swift build --package-path "$parser" --scratch-path "$repo/.build/tools" --product generate-manual >/dev/null
tool=$(swift build --package-path "$parser" --scratch-path "$repo/.build/tools" --show-bin-path)/generate-manual
mkdir -p "$dir"
# A fixed date keeps the pages the same from build to build (the commit is in the version line).
"$tool" "$binary" --multi-page --output-directory "$dir" --date "$(git -C "$repo" log -1 --format=%cs 2>/dev/null || date +%F)" \
  --authors "the allowance-relay developers" --section 1 >/dev/null
# A blank line in a command's discussion is a paragraph break in mdoc (as written it draws a warning per line).
sed -i 's/^$/.Pp/' "$dir"/*.1
gzip -9n -f "$dir"/*.1
