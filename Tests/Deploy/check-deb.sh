#!/usr/bin/env bash
# Checks the Debian package (deploy/deb/build.sh): what it holds and declares, then, with CI=true or DEB_INSTALL=1,
# what a Debian user meets: apt installs it, the service's user and directories exist, `--version` and
# `config check` run from the package as that user, and a purge removes it all.
#   Tests/Deploy/check-deb.sh PACKAGE.deb
set -euo pipefail
deb=$(realpath "${1:?check-deb.sh PACKAGE.deb}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { dpkg-deb --field "$deb" "$1"; }

# What it declares: its dependencies come from what the binary links, and none is the Swift toolchain's.
depends=$(field Depends)
for lib in libwebsockets17 libsqlite3-0 libcurl4 libpq5 libmosquitto1 libssl3 libsystemd0 libcairo2 libc6; do
  grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
grep -qi swift <<<"$depends" && fail "Depends names the Swift toolchain: $depends"
[ "$(field Package)" = allowance-relay ] || fail "Package: $(field Package)"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/allowance-relay/relay.yaml || fail "relay.yaml is not a conffile"

# What it holds.
dpkg-deb -x "$deb" "$tmp/root"
for f in usr/bin/allowance-relay usr/lib/systemd/system/allowance-relay.service usr/lib/systemd/user/allowance-relay.service \
  usr/lib/sysusers.d/allowance-relay.conf usr/lib/tmpfiles.d/allowance-relay.conf etc/allowance-relay/relay.yaml \
  usr/share/bash-completion/completions/allowance-relay usr/share/zsh/vendor-completions/_allowance-relay \
  usr/share/fish/vendor_completions.d/allowance-relay.fish usr/share/icons/hicolor/scalable/apps/allowance-relay.svg \
  usr/share/doc/allowance-relay/copyright usr/share/man/man1/allowance-relay.1.gz; do
  [ -s "$tmp/root/$f" ] || fail "the package lacks /$f"
done
bin="$tmp/root/usr/bin/allowance-relay"
readelf -d "$bin" | grep -q 'NEEDED.*libswift' && fail "the binary needs the Swift runtime's shared libraries"
# A man page for the program and one for each of its commands, each naming its command.
for command in run status config.check deliveries.retry store.prune; do
  page="$tmp/root/usr/share/man/man1/allowance-relay.$command.1.gz"
  [ -s "$page" ] || fail "no man page allowance-relay.$command.1.gz"
  zcat "$page" | grep -q "^\.Nm \"\{0,1\}allowance-relay ${command//./ }" || fail "allowance-relay.$command.1 does not name its command"
done
zcat "$tmp/root"/usr/share/man/man1/*.gz | grep -qx '' && fail "a man page has a blank line (mdoc warns of each)"
grep -q "^ExecStart=/usr/bin/allowance-relay run" "$tmp/root/usr/lib/systemd/system/allowance-relay.service" ||
  fail "the system unit does not start the packaged binary"
grep -q "^ExecStart=/usr/bin/allowance-relay run" "$tmp/root/usr/lib/systemd/user/allowance-relay.service" ||
  fail "the user unit does not start the packaged binary"
version=$("$bin" --version)
grep -q "(commit " <<<"$version" || fail "--version names no commit: $version"
[ "$(field Version)" != "${version%% *}-1" ] || grep -q "commit unknown" <<<"$version" || fail "the package version lacks the commit"

if [ "${CI:-}" != true ] && [ "${DEB_INSTALL:-}" != 1 ]; then
  echo "deb ok (contents; installing it is checked with CI=true or DEB_INSTALL=1: apt installs and purges it)"
  exit 0
fi

# Installed as a Debian user would, then purged.
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo -n"; fi
dpkg -s allowance-relay >/dev/null 2>&1 && fail "allowance-relay is installed already: this check installs and purges it"
trap '$SUDO apt-get purge -y -qq allowance-relay >/dev/null 2>&1 || true; $SUDO rm -f /etc/allowance-relay/{token,discord-url,webhook-secret}; $SUDO rmdir /etc/allowance-relay 2>/dev/null || true; rm -rf "$tmp"' EXIT
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$deb" >"$tmp/install.log" 2>&1 ||
  fail "apt-get install: $(tail -5 "$tmp/install.log")"
[ "$(command -v allowance-relay)" = /usr/bin/allowance-relay ] || fail "allowance-relay is not on the PATH at /usr/bin"
[ "$(allowance-relay --version)" = "$version" ] || fail "the installed binary says $(allowance-relay --version)"
getent passwd allowance-relay >/dev/null || fail "no allowance-relay user"
[ "$($SUDO stat -c '%a %U' /var/lib/allowance-relay)" = "700 allowance-relay" ] || fail "/var/lib/allowance-relay: $($SUDO stat -c '%a %U' /var/lib/allowance-relay)"
[ "$($SUDO stat -c '%a %U:%G' /etc/allowance-relay/relay.yaml)" = "640 root:allowance-relay" ] ||
  fail "/etc/allowance-relay/relay.yaml: $($SUDO stat -c '%a %U:%G' /etc/allowance-relay/relay.yaml)"
as_service() { $SUDO runuser -u allowance-relay -- env HOME=/var/lib/allowance-relay "$@"; }
# The packaged config, unedited, names the secret files still to write: config check says which, exit 78.
set +e; out=$(as_service allowance-relay config check 2>&1); status=$?; set -e
[ $status -eq 78 ] && grep -q "/etc/allowance-relay/token" <<<"$out" || fail "config check before the secrets: exit $status: $out"
# With them (as deploy/README says), it passes: as the service's user, finding /etc/allowance-relay/relay.yaml itself.
printf 'a-token\n' | $SUDO install -m 600 -o allowance-relay /dev/stdin /etc/allowance-relay/token
printf 'https://discord.com/api/webhooks/1/x\n' | $SUDO install -m 600 -o allowance-relay /dev/stdin /etc/allowance-relay/discord-url
printf 'whsec_%s\n' "$(openssl rand -base64 32)" | $SUDO install -m 600 -o allowance-relay /dev/stdin /etc/allowance-relay/webhook-secret
out=$(as_service allowance-relay config check 2>&1) || fail "config check with the secrets: $out"
out=$(systemd-analyze verify /usr/lib/systemd/system/allowance-relay.service 2>&1) && [ -z "$out" ] || fail "systemd-analyze verify: $out"

DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq allowance-relay >"$tmp/purge.log" 2>&1 || fail "apt-get purge: $(tail -5 "$tmp/purge.log")"
[ ! -e /usr/bin/allowance-relay ] || fail "the binary outlived the purge"
$SUDO test ! -e /var/lib/allowance-relay || fail "the database directory outlived the purge"
$SUDO test ! -e /etc/allowance-relay/relay.yaml || fail "the conffile outlived the purge"
grep -q "kept /etc/allowance-relay" "$tmp/purge.log" || fail "the purge did not say it kept the admin's secret files"
echo "deb ok (contents; installed, checked as the service's user, purged)"
