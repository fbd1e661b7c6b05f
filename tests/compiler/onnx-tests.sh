#!/bin/sh
# onnx-tests.sh BUILD_DIR [DATA_DIR]: ONNX's backend tests (Debian libonnx-testdata: node/ and
# pytorch-converted/) through pim-extract and the model library it builds.
#   - imported: the library runs on every test_data_set_N/input_K.pb and must reproduce
#     output_K.pb within rtol 1e-3, atol 1e-7 (ONNX's defaults; tests/compiler/onnx_run.c);
#   - refused: the importer (onnx-run --import, the code pim-extract runs first) or pim-extract
#     exits 1 with a message naming the node and its op type (or the graph input / initializer),
#     and nothing is written;
#   - anything else (a wrong output, another failure, a crash, a timeout) is wrong.
# Runs two tests at a time (ONNX_TESTS_JOBS), each under a time limit (ONNX_TEST_TIMEOUT s).
# ONNX_TESTS_EVERY=K (make check: 3) builds and runs the library of every K-th imported test
# only (in name order; the others are imported, not run): a full run costs about 1 s of CPU
# per imported test.  Ends with "onnx tests: N passed, R refused, W wrong"; exit status 0 only
# when W is 0.
set -u

if [ "${1:-}" = "--one" ]; then
	# --one BUILD_DIR OUT_DIR TEST_DIR: one test; writes OUT_DIR/NAME.{pass,refused,wrong}.
	B=$2 OUT=$3 DIR=$4
	name=$(basename "$(dirname "$DIR")")-$(basename "$DIR")
	W="$OUT/work/$name"
	mkdir -p "$W"
	lim=${ONNX_TEST_TIMEOUT:-120}
	# The importer alone first (no MLIR, milliseconds): what it refuses pim-extract refuses
	# with the same message, before MLIR starts.
	timeout "$lim" "$B/tests/compiler/onnx-run" --import "$DIR/model.onnx" > "$W/extract.out" 2>&1
	rc=$?
	every=${ONNX_TESTS_EVERY:-1}
	if [ "$rc" -eq 0 ] && [ "$every" -gt 1 ] &&
		[ $(( $(printf '%s' "$name" | cksum | cut -d' ' -f1) % every )) -ne 0 ]; then
		: > "$OUT/$name.skipped"
		rm -rf "$W"
		exit 0
	fi
	if [ "$rc" -eq 0 ]; then
		timeout "$lim" "$B/pim-extract" -o "$W/m.json" --emit-model "$W/m.so" "$DIR/model.onnx" \
			> "$W/extract.out" 2>&1
		rc=$?
	fi
	if [ "$rc" -eq 0 ]; then
		if timeout "$lim" "$B/tests/compiler/onnx-run" "$W/m.json" "$W/m.so" "$DIR" > "$W/run.out" 2>&1; then
			: > "$OUT/$name.pass"
		else
			echo "output differs or the run failed (exit $?): $(head -c 400 "$W/run.out")" > "$OUT/$name.wrong"
		fi
	elif [ "$rc" -eq 1 ] && grep -Eq '(: node [^ ]+ \([A-Za-z0-9]+\): |: graph input "|: initializer ")' "$W/extract.out"; then
		if [ -e "$W/m.json" ] || [ -e "$W/m.so" ]; then
			echo "refused but left output behind" > "$OUT/$name.wrong"
		else
			head -n 1 "$W/extract.out" | sed 's|^pim-extract: [^ ]*/model.onnx: ||' > "$OUT/$name.refused"
		fi
	else
		echo "pim-extract exit $rc: $(head -c 400 "$W/extract.out")" > "$OUT/$name.wrong"
	fi
	rm -rf "$W"
	exit 0
fi

B=$(cd "${1:-build}" && pwd) || exit 1
DATA=${2:-/usr/share/libonnx-testdata/data}
if [ ! -d "$DATA/node" ]; then
	echo "onnx tests: $DATA/node is missing (make deps installs libonnx-testdata)" >&2
	exit 1
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/onnx-tests.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
export TMPDIR="$T"
mkdir -p "$T/res"
start=$(date +%s)
for d in "$DATA"/node/*/ "$DATA"/pytorch-converted/*/; do
	[ -f "$d/model.onnx" ] && echo "${d%/}"
done | xargs -P "${ONNX_TESTS_JOBS:-2}" -n 1 sh "$0" --one "$B" "$T/res"

passed=$(find "$T/res" -name '*.pass' | wc -l)
refused=$(find "$T/res" -name '*.refused' | wc -l)
wrong=$(find "$T/res" -name '*.wrong' | wc -l)
skipped=$(find "$T/res" -name '*.skipped' | wc -l)
if [ -n "${ONNX_TESTS_VERBOSE:-}" ]; then
	for f in "$T"/res/*.pass; do [ -e "$f" ] && echo "PASS $(basename "$f" .pass)"; done
	for f in "$T"/res/*.refused; do [ -e "$f" ] && echo "REFUSED $(basename "$f" .refused): $(cat "$f")"; done
fi
for f in "$T"/res/*.wrong; do
	[ -e "$f" ] && echo "WRONG $(basename "$f" .wrong): $(cat "$f")"
done
[ "$skipped" -eq 0 ] || echo "imported but not run ($skipped, ONNX_TESTS_EVERY=${ONNX_TESTS_EVERY:-1})"
echo "onnx tests: $passed passed, $refused refused, $wrong wrong ($(($(date +%s) - start)) s)"
[ "$wrong" -eq 0 ] && [ "$passed" -gt 0 ]
