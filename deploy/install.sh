#!/usr/bin/env bash
# Installs allowance-relay: the binary, the systemd unit and an example config (an existing config is never
# overwritten).
#   deploy/install.sh                 system service: /usr/local/bin, /etc/systemd/system, /etc/allowance-relay
#   deploy/install.sh --user          user service:   ~/.local/bin, ~/.config/systemd/user, ~/.config/allowance-relay
#   --root DIR      install under DIR (packaging, tests); no user is created and systemd is not told
#   --binary FILE   install FILE instead of building (default: swift build -c release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
mode=system root="" binary=""
while [ $# -gt 0 ]; do
  case "$1" in
    --user) mode=user ;;
    --root) root=${2:?--root needs a directory}; shift ;;
    --binary) binary=${2:?--binary needs a file}; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$binary" ]; then
  (cd "$repo" && swift build -c release --product allowance-relay)
  binary="$repo/.build/release/allowance-relay"
fi
[ -x "$binary" ] || { echo "install.sh: $binary is not an executable" >&2; exit 1; }

if [ "$mode" = system ]; then
  bin="$root/usr/local/bin" unitdir="$root/etc/systemd/system" confdir="$root/etc/allowance-relay"
  unit="$here/allowance-relay.service" example="$repo/config/family-server.yaml"
else
  bin="$root$HOME/.local/bin" unitdir="$root$HOME/.config/systemd/user" confdir="$root$HOME/.config/allowance-relay"
  unit="$here/allowance-relay-user.service" example="$repo/config/desktop.yaml"
fi

install -d "$bin" "$unitdir"
install -d -m 0700 "$confdir"
install -m 0755 "$binary" "$bin/allowance-relay"
install -m 0644 "$unit" "$unitdir/allowance-relay.service"
if [ -e "$confdir/relay.yaml" ]; then
  echo "kept the existing $confdir/relay.yaml (the example is $example)"
else
  install -m 0600 "$example" "$confdir/relay.yaml"
  echo "wrote an example config to $confdir/relay.yaml: edit it (server.url, secrets, sinks)"
fi

if [ -z "$root" ]; then
  if [ "$mode" = system ]; then
    id allowance-relay >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin allowance-relay
    chown -R allowance-relay:allowance-relay "$confdir"
    systemctl daemon-reload
    echo "next: put the token in $confdir/token (chmod 600, owned by allowance-relay), then"
    echo "      systemctl enable --now allowance-relay && journalctl -u allowance-relay -f"
  else
    systemctl --user daemon-reload
    echo "next: systemctl --user enable --now allowance-relay && journalctl --user -u allowance-relay -f"
  fi
fi
echo "installed allowance-relay $("$bin/allowance-relay" --version) into $bin"
