#!/bin/sh
# bench_extract.sh BUILD_DIR [MODEL_DIR]: a model at real size through pim-extract, pimd
# profiling and placement (make bench-extract, part of make bench).
#
# GPT-2 small (12 blocks, d 768, vocab 50257, 124 M parameters, random weights) exported by
# examples/torch/export.py with Debian's python3-torch at opset 17, at prefill (128 tokens)
# and at one decode step (its 128-token K/V cache as inputs); exported once into MODEL_DIR
# (default BUILD_DIR/gpt2-small) and again only when export.py changes.  Each export goes
# through pim-extract --weights zero (the weights stay out of the model library, the
# manifest says so), timed, with its peak resident memory (getrusage of the child): goals
# < 2 min and < 6 GB.  Then a private pimd profiles both libraries and places each at 32, 64
# and 128 cores by operator, with the evidence label pimd gives and the operators on PIM by
# class (examples/placement-classes.py): the decode step with one warm-up and one measured run,
# the prefill with one measured run and no warm-up (profile_warmups = 0), since its loop nests
# run for minutes per pass on a small machine.  This pimd's profile_timeout_ms and
# profile_cpu_seconds are raised to an hour for that (the defaults, 2 minutes and 60 s, are for
# shared services).
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
M=${2:-$B/gpt2-small}
PYTHON=${PYTHON:-/usr/bin/python3}
. "$ROOT/examples/private-pimd.sh"
private_tmpdir bench-extract

# "RC WALL_S MAXRSS_KB" of a command (its output to $T/cmd.out).
measure() {
	"$PYTHON" - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
with open(sys.argv[1], "wb") as out:
    rc = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
wall = time.monotonic() - t
print(rc, "%.1f" % wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
verdict() { awk -v v="$1" -v g="$2" 'BEGIN { print (v < g) ? "met" : "missed" }'; }

MODELS="gpt2-small-prefill gpt2-small-decode"
stale=
for n in $MODELS; do
	[ "$M/$n.onnx" -nt "$ROOT/examples/torch/export.py" ] || stale=1
done
if [ -n "$stale" ]; then
	mkdir -p "$M"
	set -- $(measure "$T/cmd.out" "$PYTHON" "$ROOT/examples/torch/export.py" "$M" \
		--models gpt2-small-prefill,gpt2-small-decode)
	if [ "$1" -ne 0 ]; then
		echo "export.py failed:"; cat "$T/cmd.out"; exit 1
	fi
	echo "export (python3-torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), opset 17): both models in $2 s, peak RSS $(($3 / 1024)) MiB"
else
	echo "export: $M is newer than export.py, kept"
fi

failed=0
for n in $MODELS; do
	set -- $(measure "$T/cmd.out" "$B/pim-extract" --weights zero -o "$T/$n.json" --emit-model "$T/$n.so" \
		"$M/$n.onnx")
	if [ "$1" -ne 0 ]; then
		echo "pim-extract $n failed:"; cat "$T/cmd.out"; failed=1; continue
	fi
	mb=$(($(wc -c < "$M/$n.onnx") / 1000000))
	regions=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["regions"]))' "$T/$n.json")
	echo "pim-extract --weights zero $n.onnx ($mb MB): $regions regions, library $(($(wc -c < "$T/$n.so") / 1024)) KiB"
	echo "  wall time    $2 s (goal < 120 s: $(verdict "$2" 120))"
	echo "  peak RSS     $(awk -v k="$3" 'BEGIN { printf "%.2f", k * 1024 / 1e9 }') GB (goal < 6 GB: $(verdict "$3" 5859375))"
	grep -o '"source": ".*"' "$T/$n.json" | sed 's/^/  manifest     /'
done
[ "$failed" -eq 0 ] || exit 1

# No warm-up unless asked for: a request cannot ask for 0 (pimctl(1)), a configuration can.
PRIVATE_PIMD_CONF="profile_timeout_ms = 3600000
profile_cpu_seconds = 3600
profile_warmups = 0"
private_pimd_start "$B" "$T" || exit 1
ctl() { "$B/pimctl" "$@"; }
for n in gpt2-small-decode gpt2-small-prefill; do
	case $n in
	*decode) runs="--reps 1 --warmups 1" ;;
	*) runs="--reps 1" ;;
	esac
	ctl model load "$T/$n.json" > "$T/cmd.out" 2>&1 || { echo "model load $n:"; cat "$T/cmd.out"; exit 1; }
	t0=$(date +%s)
	# shellcheck disable=SC2086 # $runs is two options
	if ! ctl profile "$n" --library "$T/$n.so" $runs --timeout-ms 3600000 > "$T/profile.out" 2>&1; then
		echo "profile $n:"; cat "$T/profile.out"; exit 1
	fi
	echo "pimctl profile $n $runs: $(($(date +%s) - t0)) s, $(grep -Eo 'regions with metrics [0-9]+/[0-9]+' "$T/profile.out")"
	ctl placement "$n" --cores 32,64,128 --granularity operator --summary > "$T/place.out" 2>&1 ||
		{ echo "placement $n:"; cat "$T/place.out"; exit 1; }
	echo "pimctl placement $n --cores 32,64,128 --granularity operator --summary:"
	sed 's/^/  /' "$T/place.out"
	ctl --json placement "$n" --cores 32,64,128 --granularity operator > "$T/$n.place.json" ||
		{ echo "placement --json $n failed"; exit 1; }
done
"$PYTHON" "$ROOT/examples/placement-classes.py" "gpt2-small-decode=$T/gpt2-small-decode.place.json" \
	"gpt2-small-prefill=$T/gpt2-small-prefill.place.json"
