#!/bin/sh
# Stress test of what pimd acknowledges (make stress-durable; root: it loop-mounts ext4).
# Usage: tests/stress/durable.sh BUILD_DIR [RUNS]
# Each run: pimd keeps its store on a fresh loop-mounted ext4 while a client loads models one
# after another and notes each one pimd acknowledges; after 2 s the file system is stopped dead
# (fs-shutdown: nothing more reaches the disk, not even the journal), pimd is killed with
# SIGKILL, and the file system is mounted again (journal replay).  Every acknowledged model must
# be in the store, and the store must pass integrity_check.
set -u
B=$(cd "${1:-build}" && pwd)
RUNS=${2:-30}
PIMD=$B/pimd
PIMCTL=$B/pimctl
SHUTDOWN=$B/tests/fs-shutdown
EXAMPLE=$(pwd)/examples/decoder-block.json
if [ "$(id -u)" != 0 ]; then
	echo "stress-durable: needs root (it loop-mounts an ext4 image)" >&2
	exit 1
fi
T=$(mktemp -d /tmp/pimd-stress.XXXXXX)
PID=
LPID=
cleanup() {
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
	mountpoint -q "$T/m" && umount "$T/m"
	rm -rf "$T"
}
trap cleanup EXIT

truncate -s 128M "$T/img"
mkfs.ext4 -q -F "$T/img" || exit 1
mkdir "$T/m"
fail=0 acked_all=0 lost_all=0
for run in $(seq 1 "$RUNS"); do
	mount -o loop "$T/img" "$T/m" || exit 1
	rm -rf "$T/m/state"
	"$PIMD" --foreground --socket "$T/s" --state-dir "$T/m/state" 2>"$T/log" &
	PID=$!
	i=0
	while ! "$PIMCTL" --socket "$T/s" status >/dev/null 2>&1 && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	: > "$T/acked"
	(
		n=0
		while :; do
			n=$((n + 1))
			sed "s/\"name\": \"decoder-block\"/\"name\": \"run$run-m$n\"/" "$EXAMPLE" > "$T/model.json"
			"$PIMCTL" --socket "$T/s" model load "$T/model.json" >/dev/null 2>&1 || exit 0
			echo "run$run-m$n" >> "$T/acked"
		done
	) &
	LPID=$!
	sleep 2
	"$SHUTDOWN" "$T/m" || exit 1
	wait "$LPID"; LPID=
	kill -9 "$PID"; wait "$PID" 2>/dev/null; PID=
	umount "$T/m" || exit 1
	mount -o loop "$T/img" "$T/m" || exit 1
	sqlite3 "$T/m/state/pimd.db" 'SELECT name FROM models' | sort > "$T/stored"
	ic=$(sqlite3 "$T/m/state/pimd.db" 'PRAGMA integrity_check')
	sort "$T/acked" > "$T/acked.sorted"
	acked=$(wc -l < "$T/acked.sorted")
	lost=$(comm -23 "$T/acked.sorted" "$T/stored" | wc -l)
	comm -23 "$T/acked.sorted" "$T/stored" | sed "s/^/lost: /"
	echo "run $run: $acked models acknowledged before the file system stopped, $lost of them lost;" \
		"$(wc -l < "$T/stored") in the store; integrity_check $ic"
	[ "$acked" -gt 0 ] && [ "$lost" -eq 0 ] && [ "$ic" = ok ] || fail=1
	acked_all=$((acked_all + acked))
	lost_all=$((lost_all + lost))
	umount "$T/m"
done
echo "stress-durable: $RUNS runs, $acked_all models acknowledged, $lost_all lost"
exit $fail
