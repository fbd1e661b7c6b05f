#!/bin/sh
# demo_llm.sh BUILD_DIR [MODEL_DIR]: GPT-J-6B- and LLaMA-7B-shaped decode steps at real width
# through pim-extract, pimd profiling and placement, beside Torch-PIM's Fig. 3(f) (make demo-llm).
#
# examples/torch/llm.py exports both (d 4096; 16 heads of 256 with rotary_dim 64, one
# LayerNorm, parallel attention and tanh-GELU FFN 16384, vocab 50400 / 32 heads of 128, full
# rotary, RMSNorm, SwiGLU FFN 11008, vocab 32000; token embedding, LLM_LAYERS blocks (default
# 2), final norm, LM head; batch 1, one new token at position 128, 128 cached tokens as K/V
# inputs; random weights, fp32, external data: 3.3 and 2.7 GB) into MODEL_DIR (default
# BUILD_DIR/llm), again only when llm.py or the sizes change.  Each goes through pim-extract
# --weights zero (wall time, peak RSS), then a private pimd profiles both libraries (one
# warm-up, LLM_REPS measured runs, default 3; hardware counters where the host has them, the
# timing backend otherwise: pimd says which, and so does the table), places each at 32, 64 and
# 128 PIM cores by loop, and bench/demo_llm.py prints the Fig. 3(f) figures beside the paper's
# with the goals.  The pictures (pimctl placement --svg: the rule at 32 cores, the
# speedup at 32, 64 and 128) and the
# placement answers (--json) go to BUILD_DIR/demo-llm/ (or $LLM_OUT).
#
# LLM_WIDTH (default 4096) and LLM_LAYERS change the sizes (a small width to try the script
# out); LLM_DTYPE=fp16 exports half-precision weights (pim-extract must accept float16
# initializers); LLM_MODELS (default "gptj llama") picks the models; LLM_REPS the measured runs.
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
M=${2:-$B/llm}
WIDTH=${LLM_WIDTH:-4096}
LAYERS=${LLM_LAYERS:-2}
REPS=${LLM_REPS:-3}
DTYPE=${LLM_DTYPE:-fp32}
MODELS=${LLM_MODELS:-gptj llama}
OUT=${LLM_OUT:-$B/demo-llm}
PYTHON=${PYTHON:-/usr/bin/python3}
. "$ROOT/examples/private-pimd.sh"
private_tmpdir demo-llm
mkdir -p "$M" "$OUT"

# "RC WALL_S MAXRSS_KB" of a command (its output to the file $1), as bench_extract.sh.
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

# Export what is missing or stale (llm.py changed, or other sizes than last time).
sizes="width $WIDTH layers $LAYERS $DTYPE"
for n in $MODELS; do
	if [ "$M/$n-decode.onnx" -nt "$ROOT/examples/torch/llm.py" ] &&
		[ "$(cat "$M/$n-decode.sizes" 2>/dev/null)" = "$sizes" ]; then
		echo "export: $M/$n-decode.onnx ($sizes) is newer than llm.py, kept"
		continue
	fi
	set -- $(measure "$T/cmd.out" "$PYTHON" "$ROOT/examples/torch/llm.py" "$M" --models "$n" \
		--width "$WIDTH" --layers "$LAYERS" --dtype "$DTYPE" --external-data)
	if [ "$1" -ne 0 ]; then
		echo "llm.py $n failed:"; cat "$T/cmd.out"; exit 1
	fi
	echo "$sizes" > "$M/$n-decode.sizes"
	echo "export $n (python3-torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), opset 17): $2 s, peak RSS $(($3 / 1024)) MiB"
	grep -v -i warn "$T/cmd.out" | grep -v '^ *$' | grep -v '^ *_C\._' | sed 's/^/  /'
done

failed=0
for n in $MODELS; do
	set -- $(measure "$T/cmd.out" "$B/pim-extract" --weights zero --name "$n-decode" -o "$T/$n.json" \
		--emit-model "$T/$n.so" "$M/$n-decode.onnx")
	if [ "$1" -ne 0 ]; then
		echo "pim-extract --weights zero $n-decode.onnx failed ($2 s, peak RSS $(($3 / 1024)) MiB):"
		tail -5 "$T/cmd.out"
		failed=1
		continue
	fi
	regions=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["regions"]))' "$T/$n.json")
	echo "pim-extract --weights zero $n-decode.onnx: $regions regions, library $(($(wc -c < "$T/$n.so") / 1024)) KiB, $2 s, peak RSS $(($3 / 1024)) MiB"
done
[ "$failed" -eq 0 ] || exit 1

# The worker's address space (profile_memory_bytes, 4 GiB by default) must hold the library's
# zeroed weights, as large as the external data (12.1 GB for full-depth GPT-J-6B in fp16), and
# the activations besides.
data=0
for n in $MODELS; do
	s=$(stat -c %s "$M/$n-decode.onnx.data" 2>/dev/null || echo 0)
	[ "$s" -gt "$data" ] && data=$s
done
PRIVATE_PIMD_CONF="profile_timeout_ms = 3600000
profile_cpu_seconds = 3600
profile_memory_bytes = $((data + (4 << 30)))"
private_pimd_start "$B" "$T" || exit 1
ctl() { "$B/pimctl" "$@"; }
ctl status > "$T/status.out" 2>&1
grep -i -E 'pmu|backend|counters' "$T/status.out" | sed 's/^/pimctl status: /'
pairs=
for n in $MODELS; do
	name=$n-decode
	ctl model load "$T/$n.json" > "$T/cmd.out" 2>&1 || { echo "model load $name:"; cat "$T/cmd.out"; exit 1; }
	t0=$(date +%s)
	if ! ctl profile "$name" --library "$T/$n.so" --reps "$REPS" --warmups 1 --timeout-ms 3600000 \
		> "$T/profile.out" 2>&1; then
		echo "profile $name:"; cat "$T/profile.out"; exit 1
	fi
	echo "pimctl profile $name --reps $REPS --warmups 1: $(($(date +%s) - t0)) s, $(grep -Eo 'regions with metrics [0-9]+/[0-9]+' "$T/profile.out")"
	grep -i -E 'timing backend|no pmu|counters' "$T/profile.out" | head -2 | sed 's/^/  /'
	ctl placement "$name" --cores 32,64,128 --granularity loop --summary > "$T/place.out" 2>&1 ||
		{ echo "placement $name:"; cat "$T/place.out"; exit 1; }
	echo "pimctl placement $name --cores 32,64,128 --granularity loop --summary:"
	sed 's/^/  /' "$T/place.out"
	ctl --json placement "$name" --cores 32,64,128 --granularity loop > "$OUT/$name.placement.json" ||
		{ echo "placement --json $name failed"; exit 1; }
	ctl --json placement "$name" --cores 32,64,128 --granularity loop --movement resident \
		> "$OUT/$name.placement-resident.json" || { echo "placement --movement resident $name failed"; exit 1; }
	ctl placement "$name" --cores 32,64,128 --granularity loop --svg "$OUT/$name.svg" > "$OUT/$name.placement.txt" 2>&1 ||
		{ echo "placement --svg $name failed:"; tail -3 "$OUT/$name.placement.txt"; exit 1; }
	pairs="$pairs $n=$OUT/$name.placement.json"
done
private_pimd_stop
# shellcheck disable=SC2086 # $pairs is one argument per model
"$PYTHON" "$HERE/demo_llm.py" --width "$WIDTH" --layers "$LAYERS" $pairs
echo
pictures=
for n in $MODELS; do pictures="$pictures $n-decode.svg"; done
echo "pictures:$pictures; placement answers: *.placement.json, *.placement-resident.json; in $OUT"
