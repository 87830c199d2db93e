#!/usr/bin/env bash
# Builds allowance-relay's Debian package: the binary with the Swift runtime linked in, Depends computed from what
# it links (dpkg-shlibdeps), both systemd units, a sysusers and a tmpfiles entry, man pages and shell completions
# generated from the binary, the popups' icon, and /etc/allowance-relay/relay.yaml as a conffile.
#   deploy/deb/build.sh [--binary FILE] [--out DIR]
#   --binary FILE   package FILE (built with --static-swift-stdlib) instead of building it
#   --out DIR       where the .deb goes (default: .build/deb)
# Needs dpkg-dev (dpkg-shlibdeps) and the -dev packages the binary was built against.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary="" out="$repo/.build/deb"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$(realpath "${2:?--binary needs a file}"); shift ;;
    --out) out=$(realpath -m "${2:?--out needs a directory}"); shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
command -v dpkg-shlibdeps >/dev/null || { echo "build.sh: needs dpkg-shlibdeps (apt-get install dpkg-dev)" >&2; exit 1; }

if [ -z "$binary" ]; then
  "$repo/deploy/build-release.sh" --product allowance-relay --static-swift-stdlib
  binary="$repo/.build/release/allowance-relay"
fi
[ -x "$binary" ] || { echo "build.sh: $binary is not an executable" >&2; exit 1; }
# A Debian machine has no Swift toolchain: a binary that needs its runtime's shared libraries cannot start there.
if swift_libs=$(readelf -d "$binary" | grep -o 'libswift[^]]*\|libFoundation[^]]*\|lib_FoundationICU[^]]*'); then
  echo "build.sh: $binary links the Swift runtime dynamically ($(echo $swift_libs)); build it with" >&2
  echo "  deploy/build-release.sh --product allowance-relay --static-swift-stdlib" >&2
  exit 1
fi

# 0.1.0 (commit 0123456789ab) -> 0.1.0+g0123456789ab-1; a dirty tree or an unknown commit says so in the version.
said=$("$binary" --version)
upstream=${said%% *}
commit=$(sed -n 's/.*(commit \(.*\))/\1/p' <<<"$said")
case "$commit" in
  unknown|"") version="$upstream-1" ;;
  *) version="$upstream+g${commit//-/.}-1" ;;
esac
arch=$(dpkg --print-architecture)
stage="$out/allowance-relay_${version}_$arch"
rm -rf "$stage" "$out"/allowance-relay_*.deb && mkdir -p "$stage/DEBIAN"
cd "$stage"

# The binary, without its DWARF (the symbol table stays: a crash's backtrace still names functions).
install -D -m 0755 "$binary" usr/bin/allowance-relay
strip --strip-debug usr/bin/allowance-relay
# The units, pointed at the packaged binary.
install -d usr/lib/systemd/system usr/lib/systemd/user
sed -e 's|/usr/local/bin/allowance-relay|/usr/bin/allowance-relay|' -e 's|^# Installed by deploy/install.sh;|# Installed by the Debian package;|' \
  "$repo/deploy/allowance-relay.service" >usr/lib/systemd/system/allowance-relay.service
sed 's|%h/.local/bin/allowance-relay|/usr/bin/allowance-relay|' "$repo/deploy/allowance-relay-user.service" \
  >usr/lib/systemd/user/allowance-relay.service
install -D -m 0644 "$here/sysusers.conf" usr/lib/sysusers.d/allowance-relay.conf
install -D -m 0644 "$here/tmpfiles.conf" usr/lib/tmpfiles.d/allowance-relay.conf
# The config a family server starts from (a conffile: an upgrade never overwrites the admin's edits).
install -D -m 0644 "$repo/config/family-server.yaml" etc/allowance-relay/relay.yaml
echo /etc/allowance-relay/relay.yaml >DEBIAN/conffiles
# Man pages (one per command) and completions, from the binary's own argument parser.
"$repo/deploy/deb/man.sh" usr/bin/allowance-relay usr/share/man/man1
install -d usr/share/bash-completion/completions usr/share/zsh/vendor-completions usr/share/fish/vendor_completions.d
usr/bin/allowance-relay --generate-completion-script bash >usr/share/bash-completion/completions/allowance-relay
usr/bin/allowance-relay --generate-completion-script zsh >usr/share/zsh/vendor-completions/_allowance-relay
usr/bin/allowance-relay --generate-completion-script fish >usr/share/fish/vendor_completions.d/allowance-relay.fish
# The popups' icon and the .desktop entry their desktop-entry hint names.
install -D -m 0644 "$repo/deploy/icons/allowance-relay.svg" usr/share/icons/hicolor/scalable/apps/allowance-relay.svg
install -D -m 0644 "$repo/deploy/icons/allowance-relay.png" usr/share/icons/hicolor/64x64/apps/allowance-relay.png
install -D -m 0644 "$repo/deploy/allowance-relay.desktop" usr/share/applications/allowance-relay.desktop
doc=usr/share/doc/allowance-relay
install -D -m 0644 "$here/copyright" "$doc/copyright"
install -m 0644 "$repo/docs/manual.md" "$doc/manual.md"
install -m 0644 "$repo/deploy/README.md" "$doc/README.deploy.md"
install -d "$doc/examples"
install -m 0644 "$repo"/config/*.yaml "$doc/examples/"
install -m 0644 "$repo/docs/webhook.schema.json" "$doc/webhook.schema.json"
for script in postinst prerm postrm; do install -m 0755 "$here/$script" DEBIAN/$script; done

# Depends: the Debian package of each shared library the binary links, at the version its symbols need.
mkdir -p "$out/shlibs/debian" && printf 'Source: allowance-relay\n\nPackage: allowance-relay\nArchitecture: any\n' >"$out/shlibs/debian/control"
depends=$(cd "$out/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/allowance-relay" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
cat >DEBIAN/control <<CONTROL
Package: allowance-relay
Version: $version
Architecture: $arch
Maintainer: allowance-relay developers <allowance-relay@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN . | cut -f1)
Depends: $depends
Recommends: ca-certificates, systemd
Suggests: dunst | notification-daemon, postgresql-client
Section: net
Priority: optional
Homepage: https://github.com/allowance-relay/allowance-relay
Description: Allowance Tracker watcher and alert relay
 Watches an Allowance Tracker backend over SignalR (WebSockets, Server-Sent
 Events or Long Polling; JSON or MessagePack), keeps a durable local copy in
 SQLite (or a shared PostgreSQL) that catches up over the REST API after any
 disconnect, and relays transactions and balances to desktop popups, signed
 webhooks, chat tools (Slack, Discord, Teams, Matrix, Telegram, ntfy, ...),
 MQTT with Home Assistant discovery and e-mail, with rules, templates,
 summaries and retries.
CONTROL
# dpkg checks these; conffiles are left out as dh_md5sums does (the admin edits them).
find . \( -path ./DEBIAN -o -path ./etc \) -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums
cd "$out"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out/allowance-relay_${version}_$arch.deb" >/dev/null
rm -rf "$stage" "$out/shlibs"
echo "$out/allowance-relay_${version}_$arch.deb"
