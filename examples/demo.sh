#!/bin/sh
# demo.sh BUILD_DIR: starts pimd on a private socket and database, loads the bundled example
# model, lists and shows it, and stops pimd.  Run through "make demo".
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/pimd-demo.XXXXXX)
S=$T/pimd.sock
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "Starting pimd on $S (database $T/state/pimd.db)"
"$B/pimd" --foreground --socket "$S" --state-dir "$T/state" --log-level warning &
PID=$!
i=0
until "$B/pimctl" --socket "$S" status >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "pimd did not start" >&2; exit 1; }
	sleep 0.05
done
export PIMD_SOCKET="$S"
step "$B/pimctl" status
step "$B/pimctl" model load "$HERE/decoder-block.json"
step "$B/pimctl" model list
step "$B/pimctl" model show decoder-block
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
printf '\npimd stopped (exit status %d)\n' "$rc"
