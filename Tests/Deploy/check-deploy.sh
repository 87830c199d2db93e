#!/usr/bin/env bash
# Checks deploy/: the install script into a temporary root (twice: an existing config is kept), and both
# systemd units with `systemd-analyze verify` (ExecStart pointed at the installed binary).
#   Tests/Deploy/check-deploy.sh BINARY
set -euo pipefail
binary=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$repo/deploy/install.sh" --root "$tmp/root" --binary "$binary" >"$tmp/first.log"
grep -q "wrote an example config" "$tmp/first.log" || fail "no example config written: $(cat "$tmp/first.log")"
[ -x "$tmp/root/usr/local/bin/allowance-relay" ] || fail "binary not installed"
[ "$(stat -c %a "$tmp/root/etc/allowance-relay/relay.yaml")" = 600 ] || fail "config not mode 600"
[ "$(stat -c %a "$tmp/root/etc/allowance-relay")" = 700 ] || fail "config directory not mode 700"
grep -q "deliveries" "$tmp/root/usr/local/share/bash-completion/completions/allowance-relay" || fail "no bash completion"
[ -s "$tmp/root/usr/local/share/zsh/site-functions/_allowance-relay" ] || fail "no zsh completion"
[ -s "$tmp/root/usr/local/share/icons/hicolor/scalable/apps/allowance-relay.svg" ] || fail "no icon in the hicolor theme"
desktop="$tmp/root/usr/local/share/applications/allowance-relay.desktop"
grep -qx "X-GNOME-UsesNotifications=true" "$desktop" || fail "the .desktop entry does not say it uses notifications"
grep -qx "Icon=allowance-relay" "$desktop" || fail "the .desktop entry has not the popups' icon"
command -v desktop-file-validate >/dev/null || fail "desktop-file-validate is missing (desktop-file-utils: make test-deps installs it)"
desktop-file-validate "$desktop" || fail "desktop-file-validate"
echo "# edited by the admin" >>"$tmp/root/etc/allowance-relay/relay.yaml"
"$repo/deploy/install.sh" --root "$tmp/root" --binary "$binary" >"$tmp/second.log"
grep -q "kept the existing" "$tmp/second.log" || fail "second install did not keep the config"
grep -q "edited by the admin" "$tmp/root/etc/allowance-relay/relay.yaml" || fail "the admin's config was overwritten"

HOME="$tmp/home" XDG_DATA_HOME= XDG_CONFIG_HOME= "$repo/deploy/install.sh" --user --root "$tmp/userroot" --binary "$binary" >/dev/null
[ -f "$tmp/userroot$tmp/home/.config/systemd/user/allowance-relay.service" ] || fail "user unit not installed"
[ -s "$tmp/userroot$tmp/home/.local/share/bash-completion/completions/allowance-relay" ] || fail "no user bash completion"
autostart="$tmp/userroot$tmp/home/.config/autostart/allowance-relay-session.desktop"
grep -q "import-environment DISPLAY WAYLAND_DISPLAY" "$autostart" || fail "no autostart entry giving the user service the display"
desktop-file-validate "$autostart" || fail "desktop-file-validate, autostart"
grep -qx "WantedBy=default.target" "$repo/deploy/allowance-relay-user.service" || fail "the user unit must start on any desktop (default.target)"

installed="$tmp/root/usr/local/bin/allowance-relay"
sed "s|/usr/local/bin/allowance-relay|$installed|" "$tmp/root/etc/systemd/system/allowance-relay.service" >"$tmp/allowance-relay.service"
# verify exits 0 on unknown keys and bad values, only saying so: any output is a failure.
out=$(systemd-analyze verify "$tmp/allowance-relay.service" 2>&1) && [ -z "$out" ] || fail "systemd-analyze verify, system unit: $out"
# The system unit's sandbox keeps its exposure score (deploy/README.md): 1.1 today, at most 1.5 (15 of 100).
systemd-analyze security --offline=yes --threshold=15 "$tmp/allowance-relay.service" >"$tmp/security.log" 2>&1 ||
  fail "the system unit's exposure rose above 1.5: $(tail -1 "$tmp/security.log")"
mkdir -m 700 "$tmp/runtime"
sed "s|%h/.local/bin/allowance-relay|$installed|" "$repo/deploy/allowance-relay-user.service" >"$tmp/allowance-relay-user.service"
out=$(XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify "$tmp/allowance-relay-user.service" 2>&1) && [ -z "$out" ] \
  || fail "systemd-analyze verify, user unit: $out"
echo "deploy ok"
