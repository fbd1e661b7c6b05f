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
#      attribute with no output written, regions named after their node; external data read
#      from its file, and refused (outside the directory, beyond the end, wrong length,
#      missing file, bad offset) naming the initializer; --const-input pinning a Reshape's
#      shape, and refused (wrong type or shape, unknown input, missing file);
#   6. the decode step with external data (same manifest, PyTorch's outputs) and with
#      --weights zero (same regions, zeroed weights, smaller library, labelled manifest,
#      profiled and placed under pimd, the label in pimctl model show).
# Ends with "torch e2e: N passed, M failed"; exit status 0 only when nothing failed.
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
. "$ROOT/examples/private-pimd.sh"
private_tmpdir torch-e2e
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
# External data: w (4x3 float, 48 bytes) at offset 16 of w.bin; then broken variants.
open(out + "/w.bin", "wb").write(bytes(16) + np.arange(12, dtype=np.float32).tobytes())
def ext(name, location, offset, length):
    w = TP(name="w", data_type=TP.FLOAT, dims=[4, 3], data_location=TP.EXTERNAL)
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])], [w])
    open(out + "/" + name + ".onnx", "wb").write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
ext("ext", "w.bin", "16", "48")
ext("ext-up", "../w.bin", "16", "48")
ext("ext-abs", "/etc/passwd", "0", "48")
ext("ext-end", "w.bin", "32", "48")
ext("ext-len", "w.bin", "16", "40")
ext("ext-missing", "nothere.bin", "0", "48")
ext("ext-offset", "w.bin", "-16", "48")
# A Reshape whose shape is a graph input, and tensors to pin it with.
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [2, 6]),
                       helper.make_tensor_value_info("shape", TP.INT64, [2])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [3, 4])])
open(out + "/rs.onnx", "wb").write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
for name, value in (("shape", np.array([3, 4], np.int64)), ("shape-f", np.array([3, 4], np.float32)),
                    ("shape3", np.array([3, 2, 2], np.int64))):
    open(out + "/" + name + ".pb", "wb").write(numpy_helper.from_array(value).SerializeToString())
PY
X="$B/pim-extract"
C="$T/cli"
# refused LABEL MODEL TEXT [OPTION...]: pim-extract OPTION... refuses C/MODEL.onnx, exit
# status 1, with TEXT in its message, and writes neither the manifest nor the library.
refused() {
	_label=$1 _model=$2 _text=$3
	shift 3
	"$X" "$@" -o "$C/$_model.json" --emit-model "$C/$_model.so" "$C/$_model.onnx" > "$C/out" 2>&1
	rc=$?
	if [ "$rc" -eq 1 ] && grep -qF -- "$_text" "$C/out" && [ ! -e "$C/$_model.json" ] &&
		[ ! -e "$C/$_model.so" ]; then
		ok "$_label"
	else
		bad "$_label (exit $rc):"; cat "$C/out"
	fi
}
refused "a symbolic dimension is refused by name, nothing written" dyn \
	'graph input "x": dimension 0 ("batch") is symbolic: pin it with --input-shape x='
if "$X" --input-shape x=2x4 -o "$C/dyn.json" "$C/dyn.onnx" > "$C/out" 2>&1 &&
	"$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1])); a=m["allocations"]; r=m["regions"]
assert [x["bytes"] for x in a[:2]] == [32, 24], a
assert [(x["name"], x["op"], x["location"]) for x in r] == [("mm.0", "MatMul", "mm")], r
assert m["source"].split(" (host code ")[0].endswith("dyn.onnx"), m["source"]' "$C/dyn.json"; then
	ok "--input-shape x=2x4 pins it: arguments of 32 and 24 bytes, region mm.0 (the fill folded into the matmul) of operator MatMul at node mm"
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
refused "an unsupported attribute is refused naming node, op type and attribute, nothing written" attr \
	'node ln (LayerNormalization): attribute stash_type=0 is not supported'

# --const-input: a shape given as a graph input, pinned to a constant.
refused "a shape given as a graph input is refused until pinned" rs \
	'node rs (Reshape): input 1 (shape) must be known at import'
if "$X" --const-input shape="$C/shape.pb" -o "$C/rs-pinned.json" "$C/rs.onnx" > "$C/out" 2>&1 &&
	"$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1]))
args = [a["bytes"] for a in m["allocations"] if a["kind"] == "argument"]
assert args == [48, 48], args' "$C/rs-pinned.json"; then
	ok "--const-input shape=shape.pb: imported, the library takes x and y only (48 and 48 bytes)"
else
	bad "--const-input shape=shape.pb:"; cat "$C/out"
fi
refused "--const-input of the wrong element type is refused" rs \
	"--const-input shape: the file holds float, the graph input is int64" --const-input shape="$C/shape-f.pb"
refused "--const-input of the wrong shape is refused" rs \
	"--const-input shape: the file's shape is not the graph input's" --const-input shape="$C/shape3.pb"
refused "--const-input of an unknown input is refused" rs \
	"--const-input nope: the model has no input of that name" --const-input shape="$C/shape.pb" \
	--const-input nope="$C/shape.pb"
refused "--const-input of a missing file is refused" rs \
	"--const-input shape: $C/none.pb: No such file or directory" --const-input shape="$C/none.pb"

# External data: the weights read from the side file, at its offset.
if "$X" -o "$C/ext.json" --save-temps "$C" "$C/ext.onnx" > "$C/out" 2>&1 &&
	grep -q 'dense<"0x000000000000803F00000040000040400000804000' "$C/ext.onnx.mlir"; then
	ok "external data: w read from w.bin at offset 16 (0, 1, 2, 3, 4, ... in the imported constant)"
else
	bad "external data:"; cat "$C/out"
fi
for v in "ext-up:external data location \"../w.bin\" is outside the model's directory" \
	"ext-abs:external data location \"/etc/passwd\" is outside the model's directory" \
	"ext-end:external data at offset 32, 48 bytes, lies beyond the end of \"w.bin\" (64 bytes)" \
	"ext-len:external data length 40, the shape needs 48" \
	"ext-missing:external data file \"nothere.bin\": No such file or directory" \
	"ext-offset:external data offset \"-16\" is not a byte count"; do
	refused "external data refused: ${v%%:*} (${v#*:})" "${v%%:*}" "$C/${v%%:*}.onnx: initializer \"w\": ${v#*:}"
done

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

# The decode step again with its initializers in an external-data file: the same manifest,
# the same outputs.
if "$PYTHON" "$ROOT/examples/torch/export.py" "$T/ext" --models gpt2-decode --external-data > "$T/export.out" 2>&1 &&
	[ -s "$T/ext/gpt2-decode.onnx.data" ] &&
	"$X" -o "$T/ext.json" --name gpt2-decode --emit-model "$T/ext.so" "$T/ext/gpt2-decode.onnx" > "$T/x.out" 2>&1 &&
	"$B/tests/compiler/onnx-run" "$T/ext.json" "$T/ext.so" "$T/models/gpt2-decode" 1e-5 1e-6 > "$T/r.out" 2>&1 &&
	[ "$(grep -v '"source"' "$T/ext.json")" = "$(grep -v '"source"' "$T/gpt2-decode.json")" ]; then
	ok "gpt2-decode with external data ($(wc -c < "$T/ext/gpt2-decode.onnx.data") bytes beside it): the same manifest and PyTorch's outputs"
else
	bad "gpt2-decode with external data:"; cat "$T/export.out" "$T/x.out" "$T/r.out" 2>/dev/null
fi

# --weights zero on ONNX input: the same regions and buffers, the six weights of 64 KiB
# (token embedding, LM head, two MLP matrices per block) zeroed globals, a library smaller by
# at least 3/4 of their 384 KiB (the rest is alignment and code), the manifest labelled; the
# importer already writes them as zero splats, without their data.
ZERO_LABEL="gpt2-decode.onnx (--weights zero: 6 constants, 393216 bytes zeroed)"
mkdir -p "$T/zt"
if "$X" --weights zero --name gpt2-decode-zero -o "$T/gpt2-decode-zero.json" --emit-model "$T/gpt2-decode-zero.so" \
	--save-temps "$T/zt" "$T/models/gpt2-decode.onnx" > "$T/x.out" 2>&1 &&
	[ "$(grep -c 'arith.constant dense<0.0> : tensor<' "$T/zt/gpt2-decode-zero.onnx.mlir")" -eq 6 ] &&
	"$PYTHON" - "$T/gpt2-decode.json" "$T/gpt2-decode-zero.json" "$ZERO_LABEL" <<'PY' > "$T/z.out" 2>&1 &&
import json, sys
real, zero = (json.load(open(p)) for p in sys.argv[1:3])
assert sys.argv[3] in zero["source"], zero["source"]
assert zero["regions"] == real["regions"], "regions differ"
ra, za = real["allocations"], zero["allocations"]
assert [(a["id"], a["bytes"], a["kind"]) for a in ra] == [(a["id"], a["bytes"], a["kind"]) for a in za]
zeroed = [a for a in za if a.get("name", "").startswith("@pim_weights_zero_")]
assert sorted(a["name"] for a in zeroed) == ["@pim_weights_zero_%d" % i for i in range(6)], zeroed
assert sum(a["bytes"] for a in zeroed) == 393216
PY
	[ $(($(wc -c < "$T/gpt2-decode.so") - $(wc -c < "$T/gpt2-decode-zero.so"))) -ge 294912 ]; then
	ok "--weights zero on ONNX: imported as 6 zero splats; the same regions and buffers, 6 weights zeroed, the library $(wc -c < "$T/gpt2-decode-zero.so") bytes (real weights: $(wc -c < "$T/gpt2-decode.so"))"
else
	bad "--weights zero on ONNX:"; cat "$T/x.out" "$T/z.out" 2>/dev/null
fi

if ! private_pimd_start "$B" "$T" 2> "$T/start.out"; then
	bad "pimd did not start:"; cat "$T/start.out"
	echo "torch e2e: $passed passed, $failed failed"
	exit 1
fi
ctl() { "$B/pimctl" "$@"; }
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
# The zero-weights library profiles and places like the real one; pimctl shows the label.
if [ -f "$T/gpt2-decode-zero.so" ] && ctl model load "$T/gpt2-decode-zero.json" > "$T/load.out" 2>&1 &&
	ctl profile gpt2-decode-zero --library "$T/gpt2-decode-zero.so" --reps 2 --warmups 1 > "$T/profile.out" 2>&1 &&
	grep -Eq 'regions with metrics ([0-9]+)/\1([^0-9]|$)' "$T/profile.out" &&
	ctl model show gpt2-decode-zero > "$T/show.out" 2>&1 && grep -qF "source:      $T/models/$ZERO_LABEL" "$T/show.out" &&
	ctl placement gpt2-decode-zero --cores 32,64,128 --granularity operator > "$T/place.out" 2>&1; then
	ok "gpt2-decode --weights zero through pimd: every region measured, placed; model show: $(grep source: "$T/show.out" | sed 's/.*(--/(--/')"
else
	bad "gpt2-decode --weights zero through pimd:"; cat "$T/load.out" "$T/profile.out" "$T/show.out" "$T/place.out" 2>/dev/null
fi
private_pimd_stop
echo "torch e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
