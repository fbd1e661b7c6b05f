#!/bin/sh
# demo.sh BUILD_DIR [MANIFEST LIBRARY]: the main job end to end on the bundled example.
# Starts pimd on a private socket and database, loads the decoder block that pim-extract made
# from examples/decoder-block.mlir, profiles its model library through pimd (hardware counters
# where the host has them, the timing backend otherwise: pimd says which), prints the placement
# for 32, 64 and 128 PIM cores, a calibration against the example labels and a JIT-Q plan, and
# stops pimd.  The three also become pictures: placement.svg, calibration.svg and jitq-plan.svg
# in $DEMO_CHARTS (default BUILD_DIR/demo).  Run through "make demo" (or "make pictures").
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MANIFEST=${2:-$B/examples/decoder-block.manifest.json}
LIBRARY=${3:-$B/examples/decoder-block.so}
CHARTS=${DEMO_CHARTS:-$B/demo}
mkdir -p "$CHARTS"
CHARTS=$(cd "$CHARTS" && pwd)
T=$(mktemp -d /tmp/pimd-demo.XXXXXX)
S=$T/pimd.sock
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

# Bold command lines on a terminal only: a pipe or a file gets plain text.
if [ -t 1 ]; then BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m'); else BOLD= PLAIN=; fi
step() { printf '\n%s$ pimctl %s%s\n' "$BOLD" "$*" "$PLAIN"; "$B/pimctl" "$@"; }

# pimd refuses to run models as root unless told to; the demo profiles as whoever runs it.
: > "$T/pimd.conf"
[ "$(id -u)" = 0 ] && echo "allow_root_jobs = yes" > "$T/pimd.conf"
echo "Starting pimd on $S (database $T/state/pimd.db)"
"$B/pimd" --foreground --socket "$S" --state-dir "$T/state" --config "$T/pimd.conf" --log-level warning &
PID=$!
i=0
until "$B/pimctl" --socket "$S" status >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "pimd did not start" >&2; exit 1; }
	sleep 0.05
done
export PIMD_SOCKET="$S"
step status
if [ -f "$MANIFEST" ] && [ -f "$LIBRARY" ]; then
	step model load "$MANIFEST"
	step model list
	step profile decoder-block --library "$LIBRARY" --reps 5
else
	echo "(no pim-extract output: $MANIFEST; loading the bundled copy of its manifest, without profiling)"
	step model load "$HERE/decoder-block.json"
fi
step placement decoder-block --cores 32,64,128 --svg "$CHARTS/placement.svg"
step calibrate decoder-block --labels "$HERE/decoder-block.labels.csv" --theta 0.1:20:0.05 \
	--svg "$CHARTS/calibration.svg"
step jitq plan --model gpt-3-175B --format mx6 --from bf16 --mapping strided-opt --svg "$CHARTS/jitq-plan.svg"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
printf '\npimd stopped (exit status %d)\n' "$rc"
printf 'Pictures: %s/placement.svg, %s/calibration.svg, %s/jitq-plan.svg\n' "$CHARTS" "$CHARTS" "$CHARTS"
