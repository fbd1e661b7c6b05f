#!/bin/sh
# onnx-tests.sh BUILD_DIR [DATA_DIR]: ONNX's backend tests (Debian libonnx-testdata: node/ and
# pytorch-converted/) through pim-extract and the model library it builds.
#   - imported: the library runs on every test_data_set_N/input_K.pb and must reproduce
#     output_K.pb within |got - want| <= atol + rtol |want| (NaN where NaN is expected, the
#     same infinity; integers and bools exactly; tests/compiler/onnx_run.c), with the
#     tolerances ONNX's own runner gives each test: onnx.backend.test.loader (ONNX 1.12, the
#     version of this data) gives every test that ships its model.onnx, so all of node/ and
#     pytorch-converted/, rtol 1e-3 and atol 1e-7; per-test values exist only in the data.json
#     of tests whose model is a download (real/), which Debian does not ship;
#     a test whose shape, starts, axes, ... come as graph inputs (refused: "must be known at
#     import", "must be a constant") is imported again with its int64 inputs, then all its
#     inputs, pinned to the values of its only data set (pim-extract --const-input), which
#     the library then does not take;
#   - refused: the importer (onnx-run --import, the code pim-extract runs first) or pim-extract
#     exits 1 with a message naming the node and its op type (or the graph input / initializer,
#     or every unsupported node: "N nodes are not supported (...)"), and nothing is written;
#     or an input_K.pb holds another number of bytes than the model declares for that input
#     (the castlike tests' bfloat16 "like" input), which the library cannot take;
#   - anything else (a wrong output, another failure, a crash, a timeout) is wrong.
# Runs two tests at a time (ONNX_TESTS_JOBS), each under a time limit (ONNX_TEST_TIMEOUT s),
# and says how far it got every ONNX_TESTS_PROGRESS s (default 20).
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
	# A shape, starts, axes, ... given as a graph input where the importer needs a constant:
	# pin the int64 inputs (then, if that is not enough, every input) to their values in the
	# test's only data set (pim-extract --const-input), leave them out of the library's
	# arguments (onnx-run --skip-input), and import again.
	pins= skips=
	for kind in 7 any; do
		[ "$rc" -eq 1 ] && grep -Eq 'must be (known at import|a constant)' "$W/extract.out" &&
			[ -d "$DIR/test_data_set_0" ] && [ ! -d "$DIR/test_data_set_1" ] || break
		"$B/tests/compiler/onnx-run" --inputs "$DIR/model.onnx" > "$W/inputs" 2>&1
		pins= skips=
		while read -r k iname itype; do
			[ "$kind" = any ] || [ "$itype" = "$kind" ] || continue
			pins="$pins --const-input $iname=$DIR/test_data_set_0/input_$k.pb"
			skips="$skips --skip-input $k"
		done < "$W/inputs"
		[ -n "$pins" ] || continue
		# shellcheck disable=SC2086 # one word per option and value
		timeout "$lim" "$B/tests/compiler/onnx-run" --import $pins "$DIR/model.onnx" > "$W/extract.out" 2>&1
		rc=$?
	done
	every=${ONNX_TESTS_EVERY:-1}
	if [ "$rc" -eq 0 ] && [ "$every" -gt 1 ] &&
		[ $(( $(printf '%s' "$name" | cksum | cut -d' ' -f1) % every )) -ne 0 ]; then
		: > "$OUT/$name.skipped"
		rm -rf "$W"
		exit 0
	fi
	if [ "$rc" -eq 0 ]; then
		# shellcheck disable=SC2086
		timeout "$lim" "$B/pim-extract" $pins -o "$W/m.json" --emit-model "$W/m.so" "$DIR/model.onnx" \
			> "$W/extract.out" 2>&1
		rc=$?
	fi
	if [ "$rc" -eq 0 ]; then
		# shellcheck disable=SC2086
		timeout "$lim" "$B/tests/compiler/onnx-run" $skips "$W/m.json" "$W/m.so" "$DIR" > "$W/run.out" 2>&1
		rc=$?
		if [ "$rc" -eq 0 ]; then
			echo "${pins:+pinned}" > "$OUT/$name.pass"
		elif [ "$rc" -eq 2 ] && grep -Eq '/input_[0-9]+\.pb: [0-9]+ bytes, the library.s argument [0-9]+ has [0-9]+$' "$W/run.out"; then
			# An input file of another size than the model declares (castlike's bfloat16
			# "like" input): the importer takes the declared shape; the test is refused.
			echo "the test's data disagree with the model's declared input: $(head -c 300 "$W/run.out")" > "$OUT/$name.refused"
		else
			echo "output differs or the run failed (exit $rc): $(head -c 400 "$W/run.out")" > "$OUT/$name.wrong"
		fi
	elif [ "$rc" -eq 1 ] && grep -Eq '(: node [^ ]+ \([A-Za-z0-9]+\): |: graph input "|: initializer "|: [0-9]+ nodes are not supported \()' "$W/extract.out"; then
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
ticker=
trap '[ -z "$ticker" ] || kill "$ticker" 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
export TMPDIR="$T"
mkdir -p "$T/res"
start=$(date +%s)
for d in "$DATA"/node/*/ "$DATA"/pytorch-converted/*/; do
	[ -f "$d/model.onnx" ] && echo "${d%/}"
done > "$T/list"
total=$(wc -l < "$T/list")
echo "onnx tests: $total tests, ${ONNX_TESTS_JOBS:-2} at a time (ONNX_TESTS_EVERY=${ONNX_TESTS_EVERY:-1})"
# Progress every ONNX_TESTS_PROGRESS s (default 20) while they run: a full run takes minutes.
(
	n() { find "$T/res" -maxdepth 1 -name "*.$1" | wc -l; }
	i=0
	while sleep 1; do # one second at a time: killed, it leaves no long sleep behind
		i=$((i + 1))
		[ $((i % ${ONNX_TESTS_PROGRESS:-20})) -eq 0 ] || continue
		p=$(n pass) r=$(n refused) w=$(n wrong) k=$(n skipped)
		echo "onnx tests: $((p + r + w + k)) of $total done ($p passed, $r refused, $w wrong, $k not run), $(($(date +%s) - start)) s"
	done
) &
ticker=$!
xargs -P "${ONNX_TESTS_JOBS:-2}" -n 1 sh "$0" --one "$B" "$T/res" < "$T/list"
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null

passed=$(find "$T/res" -name '*.pass' | wc -l)
pinned=$(grep -l pinned "$T"/res/*.pass 2>/dev/null | wc -l)
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
echo "passed with inputs pinned as constants (--const-input): $pinned"
echo "onnx tests: $passed passed, $refused refused, $wrong wrong ($(($(date +%s) - start)) s)"
[ "$wrong" -eq 0 ] && [ "$passed" -gt 0 ]
