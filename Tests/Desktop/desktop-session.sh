#!/usr/bin/env bash
# A private headless desktop for the popup tests: Xvfb, a session D-Bus, and optionally dunst.
#   desktop-session.sh start DIR [--no-notifier]   prints DISPLAY=... and DBUS_SESSION_BUS_ADDRESS=... lines
#                                                 (dunst reads DIR/dunstrc if there is one)
#   desktop-session.sh shot DIR                   screenshot of the screen into DIR/desktop.png
#   desktop-session.sh stop DIR                   stops dunst, then the bus, then Xvfb
set -euo pipefail
cmd=$1 dir=$2
mkdir -p "$dir"

case "$cmd" in
start)
  # -displayfd: Xvfb picks a free display itself and writes its number once it accepts clients (no race
  # between parallel sessions, no guessing how long it takes under load).
  Xvfb -displayfd 3 -screen 0 1024x600x24 -nolisten tcp >"$dir/xvfb.log" 2>&1 3>"$dir/displayno" </dev/null &
  echo $! >"$dir/xvfb.pid"
  for _ in $(seq 400); do [ -s "$dir/displayno" ] && break; sleep 0.05; done
  if ! [ -s "$dir/displayno" ]; then
    kill -KILL "$(cat "$dir/xvfb.pid")" 2>/dev/null || true
    echo "Xvfb did not start within 20 s: $(cat "$dir/xvfb.log")" >&2
    exit 1
  fi
  display=":$(head -1 "$dir/displayno")"
  echo "$display" >"$dir/display"
  # Every background process gets its own output files: none may hold the caller's pipe open.
  # Without a notifier the bus must not start one on demand either (dunst installs a D-Bus activation file).
  bus_config=(--session)
  if [ "${3:-}" = "--no-notifier" ]; then
    cat >"$dir/bus.conf" <<'XML'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
XML
    bus_config=(--config-file="$dir/bus.conf")
  fi
  # The bus's socket in DIR, not /tmp: the daemon is killed at the end and cannot remove it.
  bus=$(dbus-daemon "${bus_config[@]}" --address="unix:dir=$dir" --fork --print-address=1 --print-pid=3 \
    3>"$dir/dbus.pid" 2>"$dir/dbus.log" </dev/null)
  if [ "${3:-}" != "--no-notifier" ]; then
    # DIR/dunstrc, when the test wrote one, replaces dunst's default configuration.
    config=()
    [ -f "$dir/dunstrc" ] && config=(-config "$dir/dunstrc")
    DISPLAY=$display DBUS_SESSION_BUS_ADDRESS=$bus dunst "${config[@]}" >"$dir/dunst.log" 2>&1 </dev/null &
    echo $! >"$dir/dunst.pid"
    for _ in $(seq 100); do
      DBUS_SESSION_BUS_ADDRESS=$bus dbus-send --session --print-reply --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.Notifications 2>/dev/null | grep -q 'boolean true' && break
      sleep 0.05
    done
  fi
  echo "$display" >"$dir/display"
  echo "DISPLAY=$display"
  echo "DBUS_SESSION_BUS_ADDRESS=$bus"
  ;;
shot)
  DISPLAY=$(cat "$dir/display") import -window root "$dir/desktop.png"
  ;;
stop)
  # SIGKILL: a test process ignores SIGTERM (swift-service-lifecycle's habit), and its children inherit that.
  for p in dunst dbus xvfb; do
    [ -f "$dir/$p.pid" ] && kill -KILL "$(cat "$dir/$p.pid")" 2>/dev/null || true
  done
  if [ -f "$dir/display" ]; then
    n=$(cut -c2- "$dir/display")
    sleep 0.1
    rm -f "/tmp/.X$n-lock" "/tmp/.X11-unix/X$n"
  fi
  ;;
esac
