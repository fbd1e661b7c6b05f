#!/bin/sh
# run.sh BUILD_DIR: the tests of pim-extract, after "make compiler-examples".
#   1. test_extract (check): manifests of the examples and test inputs against hand-derived
#      numbers, refusals, model libraries run through pim_model_entry with counting hooks;
#   2. every example manifest loads into a private pimd with "pimctl model load", and
#   3. its model library runs under pimd's profiling worker ("pimctl profile --library"), every
#      region measured (when pimd and pimctl are built);
#   4. a library built for another manifest is refused;
#   5. the committed example manifest is what pim-extract makes of its source;
#   6. placement at operator granularity groups the nests of one framework operator;
#   7. a --weights zero library runs under the worker and pimctl model show labels it.
# Ends with "compiler: N passed, M failed"; exit status 0 only when nothing failed.
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
T=$(mktemp -d /tmp/pim-extract-tests.XXXXXX)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

export PIM_EXTRACT="$B/pim-extract"
export PIM_EXAMPLES_OUT="$B/examples"
export PIM_TEST_INPUTS="$ROOT/tests/compiler/inputs"
export TMPDIR="$T"
passed=0
failed=0

# ---- 1. check-based tests
echo "compiler: pim-extract's check-based tests (test_extract; its results come at its end)"
"$B/tests/compiler/test_extract" > "$T/check.out" 2>&1
rc=$?
cat "$T/check.out"
line=$(grep -E '^[0-9]+%: Checks: ' "$T/check.out" | tail -n 1)
if [ -n "$line" ]; then
	checks=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
	fails=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
	errs=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
	passed=$((passed + checks - fails - errs))
	failed=$((failed + fails + errs))
else
	echo "test_extract produced no summary (exit status $rc)"
	failed=$((failed + 1))
fi
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=$((failed + 1))

# ---- 2. the manifests load into pimd
echo "compiler: the examples' manifests loaded into pimd and their libraries profiled"
if [ -x "$B/pimd" ] && [ -x "$B/pimctl" ]; then
	S="$T/pimd.sock"
	# pimd refuses to run models as root unless told to; the tests run as whoever runs them
	: > "$T/pimd.conf"
	[ "$(id -u)" = 0 ] && echo "allow_root_jobs = yes" > "$T/pimd.conf"
	"$B/pimd" --foreground --socket "$S" --state-dir "$T/state" --config "$T/pimd.conf" \
		--log-level warning > "$T/pimd.log" 2>&1 &
	PID=$!
	i=0
	until "$B/pimctl" --socket "$S" status > /dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -ge 100 ]; then
			echo "pimd did not start:"; cat "$T/pimd.log"; break
		fi
		sleep 0.05
	done
	profile=
	"$B/pimctl" --help 2>&1 | grep -q 'profile MODEL --library' && profile=1
	for m in "$B"/examples/*.manifest.json; do
		name=$(basename "$m" .manifest.json)
		if "$B/pimctl" --socket "$S" model load "$m" > "$T/load.out" 2>&1; then
			passed=$((passed + 1))
		else
			echo "FAIL pimctl model load $m:"; cat "$T/load.out"
			failed=$((failed + 1))
			continue
		fi
		[ -n "$profile" ] || continue
		# 3. the library runs under the profiling worker: every region gets metrics.
		if "$B/pimctl" --socket "$S" profile "$name" --library "$B/examples/$name.so" \
			--reps 2 --warmups 1 > "$T/profile.out" 2>&1 &&
			grep -Eq 'regions with metrics ([0-9]+)/\1([^0-9]|$)' "$T/profile.out"; then
			passed=$((passed + 1))
		else
			echo "FAIL pimctl profile $name --library $B/examples/$name.so:"; cat "$T/profile.out"
			failed=$((failed + 1))
		fi
	done
	[ -n "$profile" ] || echo "note: this pimctl has no 'profile --library'; libraries not run by the worker"
	# 4. a library built for another manifest is refused by name, before it runs.
	if [ -n "$profile" ] && [ -f "$B/examples/gemv.so" ] && [ -f "$B/examples/mlp.so" ]; then
		if "$B/pimctl" --socket "$S" profile gemv --library "$B/examples/mlp.so" --reps 1 \
			> "$T/mismatch.out" 2>&1; then
			echo "FAIL profile gemv --library mlp.so succeeded:"; cat "$T/mismatch.out"
			failed=$((failed + 1))
		elif grep -q 'the model library was built for another manifest (library digest' "$T/mismatch.out"; then
			passed=$((passed + 1))
		else
			echo "FAIL profile gemv --library mlp.so: not refused as a mismatch:"; cat "$T/mismatch.out"
			failed=$((failed + 1))
		fi
	fi
	# 5. a library whose host code needs an instruction set this CPU lacks (PIM_MODEL_TARGET) is
	# refused by name, before it runs, instead of dying of SIGILL.
	if [ -n "$profile" ]; then
		printf '%s\n' '#include <stddef.h>' 'const char pim_model_target[] = "x86-64-v9";' \
			'void pim_region_enter(int); void pim_region_exit(int);' \
			'int pim_model_entry(void *const *a, size_t n) { pim_region_enter(0); pim_region_exit(0); return 0; }' \
			> "$T/future.c"
		if ${CC:-cc} -shared -fPIC -o "$T/future.so" "$T/future.c" > "$T/future.out" 2>&1 &&
			! "$B/pimctl" --socket "$S" profile gemv --library "$T/future.so" --reps 1 \
				>> "$T/future.out" 2>&1 &&
			grep -q "host code was built for x86-64-v9 (an unknown instruction set), which this CPU does not have" "$T/future.out"; then
			passed=$((passed + 1))
		else
			echo "FAIL a library built for x86-64-v9 is not refused by name:"; cat "$T/future.out"
			failed=$((failed + 1))
		fi
	fi
	# 6. operator granularity groups the nests of one framework operator (loc("NODE"("TYPE")):
	# the matmul and the scaling of /h.0/attn/MatMul decide as one unit), loop granularity does not.
	if "$B/pim-extract" --nests source "$HERE/inputs/onnx-locs.mlir" -o "$T/onnx-locs.json" > "$T/groups.out" 2>&1 &&
		"$B/pimctl" --socket "$S" model load "$T/onnx-locs.json" >> "$T/groups.out" 2>&1 &&
		"$B/pimctl" --socket "$S" placement onnx-locs --granularity operator --cores 32 --verbose \
			> "$T/operator.out" 2>&1 &&
		"$B/pimctl" --socket "$S" placement onnx-locs --granularity loop --cores 32 --verbose \
			> "$T/loop.out" 2>&1 &&
		[ "$(grep -c 'operator group of 2 regions' "$T/operator.out")" -eq 2 ] &&
		grep -q '^ *1 /h.0/attn/MatMul.1 .*operator group of 2 regions' "$T/operator.out" &&
		! grep -q 'operator group' "$T/loop.out"; then
		passed=$((passed + 1))
	else
		echo "FAIL operator groups of tests/compiler/inputs/onnx-locs.mlir:"
		cat "$T/groups.out" "$T/operator.out" "$T/loop.out" 2>/dev/null
		failed=$((failed + 1))
	fi
	# 7. a --weights zero library runs under the profiling worker (its constructor zeroes the
	# weights), and pimctl model show labels the model.
	if "$B/pim-extract" "$HERE/inputs/weights.mlir" --weights zero -o "$T/weights.json" \
		--emit-model "$T/weights.so" > "$T/weights.out" 2>&1 &&
		"$B/pimctl" --socket "$S" model load "$T/weights.json" >> "$T/weights.out" 2>&1 &&
		"$B/pimctl" --socket "$S" model show weights > "$T/show.out" 2>&1 &&
		grep -q 'source: .*weights.mlir (--weights zero: 1 constants, 65536 bytes zeroed)' "$T/show.out" &&
		{ [ -z "$profile" ] || { "$B/pimctl" --socket "$S" profile weights --library "$T/weights.so" \
			--reps 2 --warmups 1 > "$T/profile.out" 2>&1 &&
			grep -Eq 'regions with metrics ([0-9]+)/\1([^0-9]|$)' "$T/profile.out"; }; }; then
		passed=$((passed + 1))
	else
		echo "FAIL --weights zero through pimd:"
		cat "$T/weights.out" "$T/show.out" "$T/profile.out" 2>/dev/null
		failed=$((failed + 1))
	fi
	kill "$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
	PID=
else
	echo "note: $B/pimd or $B/pimctl not built; manifests not loaded into pimd"
fi

# ---- 5. the committed example manifest is what pim-extract makes of the committed source
echo "compiler: examples/decoder-block.json against pim-extract's output"
if [ -f "$B/examples/decoder-block.manifest.json" ]; then
	# (but for the instruction set of the host code, which is this machine's: "(host code ...)")
	if sed 's/ (host code [^)]*)//' "$B/examples/decoder-block.manifest.json" |
		cmp -s "$ROOT/examples/decoder-block.json" -; then
		passed=$((passed + 1))
	else
		echo "FAIL examples/decoder-block.json differs from pim-extract's output for examples/decoder-block.mlir;"
		echo "     regenerate it: sed 's/ (host code [^)]*)//' $B/examples/decoder-block.manifest.json > examples/decoder-block.json"
		failed=$((failed + 1))
	fi
fi

echo "compiler: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
