#!/bin/sh
# torch-e2e.sh BUILD_DIR: the PyTorch path end to end, with Debian's python3-torch.
#   1. examples/torch/export.py exports the example models (GPT-2-style prefill and decode step,
#      LLaMA-style block, small CNN) to ONNX, with PyTorch's outputs for one input;
#   2. pim-extract builds each one's manifest and model library;
#   3. onnx-run runs the library and compares with PyTorch: |got - want| <= 1e-6 + 1e-5 |want|;
#   4. a private pimd loads each manifest, profiles the library (every region measured) and
#      places it at 32, 64 and 128 cores, by loop and by operator;
#   5. the importer's command line on small models made with python3-onnx: a symbolic
#      dimension refused until --input-shape pins it, refusals naming node, op type and
#      attribute with no output written, regions named after their node.
# Ends with "torch e2e: N passed, M failed"; exit status 0 only when nothing failed.
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/torch-e2e.XXXXXX")
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
export TMPDIR="$T"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }

if ! "$PYTHON" -c 'import torch, onnx' 2>/dev/null; then
	echo "torch e2e: $PYTHON cannot import torch and onnx (make deps installs python3-torch python3-onnx)"
	exit 1
fi
if "$PYTHON" "$ROOT/examples/torch/export.py" "$T/models" > "$T/export.out" 2>&1; then
	ok "export.py: $(grep -c '\.onnx:' "$T/export.out") models exported"
else
	bad "export.py:"; cat "$T/export.out"
	echo "torch e2e: $passed passed, $failed failed"
	exit 1
fi

# ---- 5. the importer's command line
"$PYTHON" - "$T/cli" <<'PY' || bad "making the command-line test models"
import sys, os
import numpy as np
from onnx import helper, numpy_helper, TensorProto as TP
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, ["batch", 3])], [w])
open(out + "/dyn.onnx", "wb").write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
g = helper.make_graph([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", stash_type=0)], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
                      [numpy_helper.from_array(np.ones(4, np.float32), "s")])
open(out + "/attr.onnx", "wb").write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
PY
X="$B/pim-extract"
C="$T/cli"
"$X" -o "$C/dyn.json" --emit-model "$C/dyn.so" "$C/dyn.onnx" > "$C/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q 'graph input "x": dimension 0 ("batch") is symbolic: pin it with --input-shape x=' "$C/out" &&
	[ ! -e "$C/dyn.json" ] && [ ! -e "$C/dyn.so" ]; then
	ok "a symbolic dimension is refused by name, nothing written"
else
	bad "symbolic dimension (exit $rc):"; cat "$C/out"
fi
if "$X" --input-shape x=2x4 -o "$C/dyn.json" "$C/dyn.onnx" > "$C/out" 2>&1 &&
	"$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1])); a=m["allocations"]; r=m["regions"]
assert [x["bytes"] for x in a[:2]] == [32, 24], a
assert [(x["name"], x["op"], x["location"]) for x in r] == [("mm.0", "MatMul", "mm"), ("mm.1", "MatMul", "mm")], r
assert m["source"].endswith("dyn.onnx"), m["source"]' "$C/dyn.json"; then
	ok "--input-shape x=2x4 pins it: arguments of 32 and 24 bytes, regions mm.0 (fill) and mm.1 of operator MatMul at node mm"
else
	bad "--input-shape x=2x4:"; cat "$C/out"
fi
"$X" --input-shape x=2x4 --input-shape y=2x4 -o "$C/dyn2.json" "$C/dyn.onnx" > "$C/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q -- '--input-shape y: the model has no input of that name' "$C/out"; then
	ok "--input-shape of an unknown input is refused"
else
	bad "--input-shape y (exit $rc):"; cat "$C/out"
fi
"$X" --input-shape x=2x4x5 -o "$C/dyn2.json" "$C/dyn.onnx" > "$C/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q -- '--input-shape x has rank 3, the model.s input has rank 2' "$C/out"; then
	ok "--input-shape of the wrong rank is refused"
else
	bad "--input-shape x=2x4x5 (exit $rc):"; cat "$C/out"
fi
"$X" -o "$C/attr.json" --emit-model "$C/attr.so" "$C/attr.onnx" > "$C/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q 'node ln (LayerNormalization): attribute stash_type=0 is not supported' "$C/out" &&
	[ ! -e "$C/attr.json" ] && [ ! -e "$C/attr.so" ]; then
	ok "an unsupported attribute is refused naming node, op type and attribute, nothing written"
else
	bad "unsupported attribute (exit $rc):"; cat "$C/out"
fi

MODELS="gpt2-prefill gpt2-decode llama-block cnn"
for n in $MODELS; do
	t0=$(date +%s)
	if "$B/pim-extract" -o "$T/$n.json" --emit-model "$T/$n.so" "$T/models/$n.onnx" > "$T/x.out" 2>&1; then
		ok "pim-extract $n.onnx: $(grep -c '"id"' "$T/$n.json") ids in the manifest ($(($(date +%s) - t0)) s)"
	else
		bad "pim-extract $n.onnx:"; cat "$T/x.out"; continue
	fi
	if "$B/tests/compiler/onnx-run" "$T/$n.json" "$T/$n.so" "$T/models/$n" 1e-5 1e-6 > "$T/r.out" 2>&1; then
		ok "$n: the library's outputs equal PyTorch's (rtol 1e-5, atol 1e-6)"
	else
		bad "$n: outputs differ from PyTorch's:"; cat "$T/r.out"
	fi
done

S="$T/pimd.sock"
: > "$T/pimd.conf"
# Run as root (make check on a fresh machine), the models may run as root too.
[ "$(id -u)" = 0 ] && echo "allow_root_jobs = yes" > "$T/pimd.conf"
"$B/pimd" --foreground --socket "$S" --state-dir "$T/state" --config "$T/pimd.conf" --log-level warning \
	> "$T/pimd.log" 2>&1 &
PID=$!
i=0
until "$B/pimctl" --socket "$S" status > /dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -ge 200 ]; then
		bad "pimd did not start:"; cat "$T/pimd.log"
		echo "torch e2e: $passed passed, $failed failed"
		exit 1
	fi
	sleep 0.05
done
ctl() { "$B/pimctl" --socket "$S" "$@"; }
for n in $MODELS; do
	[ -f "$T/$n.so" ] || continue
	if ! ctl model load "$T/$n.json" > "$T/load.out" 2>&1; then
		bad "pimctl model load $n:"; cat "$T/load.out"; continue
	fi
	if ctl profile "$n" --library "$T/$n.so" --reps 2 --warmups 1 > "$T/profile.out" 2>&1 &&
		grep -Eq 'regions with metrics ([0-9]+)/\1([^0-9]|$)' "$T/profile.out"; then
		ok "pimctl profile $n: $(grep -Eo 'regions with metrics [0-9]+/[0-9]+' "$T/profile.out")"
	else
		bad "pimctl profile $n:"; cat "$T/profile.out"; continue
	fi
	for g in loop operator; do
		if ctl placement "$n" --cores 32,64,128 --granularity "$g" > "$T/place.out" 2>&1; then
			ok "pimctl placement $n --cores 32,64,128 --granularity $g"
		else
			bad "pimctl placement $n --granularity $g:"; cat "$T/place.out"
		fi
	done
done
kill "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
PID=
echo "torch e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
