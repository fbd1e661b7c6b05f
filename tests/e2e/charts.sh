#!/bin/sh
# The pictures of pimctl end to end.  Usage: tests/e2e/charts.sh BUILD_DIR
# Starts pimd privately, draws the placement of models of 1, 100 and 10,000 regions (and the
# example decoder block) with pimctl --svg, parses every SVG with xmllint and checks its marks
# against pimctl --json's answer (one mark per region, colour by decision, θ and σ where the
# answer puts them, regions left and right of θ as C3 says); the same for calibrations (accuracy
# against θ per σ, the chosen θ) and JIT-Q plans (a mark per block, stalls, memory); then renders
# each chart in headless Chromium and fails on any error it reports.  Last, the progress lines
# of profile, calibrate and jitq quantize under a pseudo-terminal (script), and their absence
# in a pipe and with --json.
set -u
B=$(cd "${1:-build}" && pwd)
PIMCTL=$B/pimctl
T=$(mktemp -d /tmp/pimd-charts.XXXXXX)
pass=0 fail=0 PID=
PIM_COLOUR='#d95f02'
HOST_COLOUR='#1f78b4'

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@" >"$T/out" 2>&1; then ok "$d"; else bad "$d"; sed 's/^/     > /' "$T/out"; fi
}
# xpath FILE EXPR: the value of an XPath 1.0 expression (SVG elements by local-name())
xpath() { xmllint --xpath "$2" "$1" 2>/dev/null; }

S=$T/pimd.sock
# frames of 64 MiB: the large quantize file below
printf 'allow_root_jobs = yes\nmax_frame_bytes = 64M\n' > "$T/pimd.conf"
"$B/pimd" --foreground --socket "$S" --state-dir "$T/state" --config "$T/pimd.conf" 2>"$T/log" &
PID=$!
i=0
until "$PIMCTL" --socket "$S" status >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "FAIL pimd did not start"; sed 's/^/     | /' "$T/log"; exit 1; }
	sleep 0.05
done
export PIMD_SOCKET="$S"

# marks_match MODEL SVG JSON: every region of the answer has one mark in the rule's panels, in
# the colour of its decision, on the side of θ that C3 says; aggregated marks (data-regions)
# count the regions they stand for.
marks_match() {
	m=$1 svg=$2 json=$3
	n=$(jq '.estimates[0].regions | length' "$json")
	single=$(xpath "$svg" 'count(//*[local-name()="g"][starts-with(@class,"stage")]/*[@data-region])')
	many=$(xpath "$svg" 'sum(//*[local-name()="g"][starts-with(@class,"stage")]/*/@data-regions)')
	[ $((single + many)) -eq "$n" ] || { echo "$m: $single single marks + $many aggregated, $n regions"; return 1; }
	strip=$(xpath "$svg" 'count(//*[local-name()="g"][@class="strip"]/*[@data-region]) + sum(//*[local-name()="g"][@class="strip"]/*/@data-regions)')
	[ "$strip" -eq "$n" ] || { echo "$m: the strip counts $strip regions, not $n"; return 1; }
	theta=$(jq '.params.theta' "$json")
	tx=$(xpath "$svg" 'string(//*[@data-theta]/@x1)')
	dt=$(xpath "$svg" 'string(//*[@data-theta]/@data-theta)')
	awk -v a="$theta" -v b="$dt" 'BEGIN { exit !(a == b) }' || { echo "θ line at $dt, answer $theta"; return 1; }
	ds=$(xpath "$svg" 'string(//*[@data-sigma]/@data-sigma)')
	awk -v a="$(jq '.params.sigma' "$json")" -v b="$ds" 'BEGIN { exit !(a == b) }' ||
		{ echo "σ line at $ds"; return 1; }
	[ "$single" -eq 0 ] && return 0
	# one line per single mark (the writer puts one element on a line): id, class, fill, x
	grep 'data-region="' "$svg" | grep 'class="mark ' |
		sed -n 's/.*\(cx="\|d="M\)\([-0-9.]*\).*class="mark \([a-z]*\)" fill="\([^"]*\)" data-region="\([0-9]*\)".*/\5 \3 \4 \2/p' |
		sort -k1,1 > "$T/marks"
	jq -r '.estimates[0].regions[] | "\(.region) \(.place) \(.c1.state) \(.c2.state) \(.c3.state)"' "$json" |
		sort -k1,1 > "$T/decisions"
	join "$T/marks" "$T/decisions" | awk -v tx="$tx" -v pc="$PIM_COLOUR" -v hc="$HOST_COLOUR" '
		{ n++ }
		$2 != $5 { print "region " $1 ": mark " $2 ", decision " $5; bad++ }
		($5 == "pim" && $3 != pc) || ($5 == "host" && $3 != hc) { print "region " $1 ": colour " $3; bad++ }
		$6 == "true" && $7 == "true" && $8 == "true" && $4 < tx - 0.05 { print "region " $1 ": C3 holds, x " $4 " left of θ " tx; bad++ }
		$6 == "true" && $7 == "true" && $8 == "false" && $4 > tx + 0.05 { print "region " $1 ": C3 fails, x " $4 " right of θ " tx; bad++ }
		END { if (n != '"$single"') { print n " marks matched, " '"$single"' " drawn"; bad++ } exit bad > 0 }'
}

for n in 1 100 10000; do
	check "a model of $n regions with metrics" "$B/tests/e2e-tool" synth "$S" "synth$n" "$n"
	t0=$(date +%s%N)
	check "pimctl placement --svg, $n regions" "$PIMCTL" placement "synth$n" --cores 64,128,256 --svg "$T/p$n.svg"
	t1=$(date +%s%N)
	echo "     ($n regions: placement and chart in $(( (t1 - t0) / 1000000 )) ms, $(wc -c < "$T/p$n.svg") bytes)"
	check "the chart of $n regions is well-formed XML" xmllint --noout "$T/p$n.svg"
	"$PIMCTL" --json placement "synth$n" --cores 64,128,256 > "$T/p$n.json"
	check "its marks match the answer: one per region, colour, side of θ ($n regions)" \
		marks_match "synth$n" "$T/p$n.svg" "$T/p$n.json"
	check "one speedup point per core count ($n regions)" \
		[ "$(xpath "$T/p$n.svg" 'count(//*[@class="speedup"])')" -eq 3 ]
	segs=$(jq '.estimates[0].movement.segments' "$T/p$n.json")
	check "the strip's brackets count the answer's $segs PIM segments ($n regions)" \
		[ "$(xpath "$T/p$n.svg" 'sum(//*[@data-segments]/@data-segments)')" -eq "$segs" ]
done
check "10,000 regions stay a few MB (aggregated)" [ "$(wc -c < "$T/p10000.svg")" -lt 4000000 ]
check "10,000 regions: some marks aggregated" \
	[ "$(xpath "$T/p10000.svg" 'count(//*[@data-regions])')" -gt 0 ]

# ------------------------------------------------------------ marginal decisions
# 100 regions measured twice each, 40% apart (spread 0.4): a decision whose threshold (T_ctx, θ)
# lies within its value's noise, ±0.5 × 0.4, and could change with it, is labelled marginal in
# the text (PLACE ~ and the count), in --json (a boolean and the threshold) and in the picture
# (a ring on the region's mark); one repetition each (synth100) knows no noise.
check "a model of 100 regions measured twice, 40% apart" "$B/tests/e2e-tool" synth "$S" noisy 100 0.4
"$PIMCTL" --json placement noisy > "$T/noisy.json"
"$PIMCTL" placement noisy > "$T/noisy.txt"
nm=$(jq '.estimates[0].marginal' "$T/noisy.json")
check "some decisions are marginal ($nm of 100)" [ "$nm" -gt 0 ]
check "--json: as many regions marked marginal, each naming its threshold" \
	[ "$(jq '[.estimates[0].regions[] | select(.marginal and (.marginal_on | length) > 0)] | length' "$T/noisy.json")" -eq "$nm" ]
check "--json: each is within the noise of a condition it names" \
	[ "$(jq '[.estimates[0].regions[] | select(.marginal) | select([.marginal_on[] as $t | {t_ctx: .c1, theta: .c3, sigma: .c4}[$t] | select(.marginal and (.lhs - .rhs | fabs) <= .noise)] | length == 0)] | length' "$T/noisy.json")" -eq 0 ]
check "text: one ~ row per marginal decision" [ "$(grep -c ' \(PIM\|host\)~$' "$T/noisy.txt")" -eq "$nm" ]
check "text: the summary counts them, with the legend" sh -c \
	"grep -q '^  ~ *$nm  marginal, within the measured noise of' '$T/noisy.txt' && grep -q 'PLACE ~: marginal' '$T/noisy.txt'"
check "pimctl placement --svg of the noisy model" "$PIMCTL" placement noisy --svg "$T/noisy.svg"
check "its chart is well-formed" xmllint --noout "$T/noisy.svg"
jq -r '.estimates[0].regions[] | select(.marginal) | .region' "$T/noisy.json" | sort > "$T/noisy.ids"
grep -o 'class="marginal" fill="none" stroke="[^"]*" data-marginal="[0-9]*"' "$T/noisy.svg" |
	sed 's/.*data-marginal="//; s/"//' | sort > "$T/noisy.rings"
check "SVG: a ring on each marginal decision's mark, and on no other" cmp "$T/noisy.ids" "$T/noisy.rings"
check "SVG: the legend and the count" sh -c \
	"grep -q 'marginal: within the measured' '$T/noisy.svg' && grep -q 'marginal decisions (ringed): $nm<' '$T/noisy.svg'"
# (θ given explicitly, so that B_cpu's spread, when its probe measured one, does not count)
"$PIMCTL" --json placement synth100 --param theta="$(jq '.params.theta' "$T/p100.json")" > "$T/p100t.json"
check "one repetition each: no marginal decision, and the answer says why" sh -c \
	"[ \$(jq '.estimates[0].marginal' '$T/p100t.json') -eq 0 ] && jq -e '.notes[] | select(test(\"no decision can be labelled marginal\"))' '$T/p100t.json' >/dev/null"

"$PIMCTL" model load tests/e2e/data/decoder-block.json >/dev/null
check "the example model: placement --svg" "$PIMCTL" placement decoder-block --svg "$T/decoder.svg"
check "the example's chart is well-formed" xmllint --noout "$T/decoder.svg"
"$PIMCTL" --json placement decoder-block > "$T/decoder.json"
check "the example's marks match (no metrics: every region fails Stage 1)" \
	marks_match decoder-block "$T/decoder.svg" "$T/decoder.json"
check "a <title> for each region's mark" \
	[ "$(xpath "$T/decoder.svg" 'count(//*[@data-region]/*[local-name()="title"])')" -eq 18 ]
check "--json with --svg: stdout stays JSON" sh -c "'$PIMCTL' --json placement decoder-block --svg '$T/d2.svg' | jq -e .model"
check "--svg to a path that cannot be written: exit 1, the path named" sh -c \
	"'$PIMCTL' placement decoder-block --svg '$T/no/such/dir.svg' 2>&1; [ \$? -eq 1 ]" 
grep -q "no/such/dir.svg: No such file or directory" "$T/out" && ok "the error names the path" || bad "the error names the path"
check "--svg without a file is a usage error" sh -c "'$PIMCTL' placement decoder-block --svg; [ \$? -eq 2 ]"

# ------------------------------------------------------------ calibration
# Labels for every region (every third beneficial); σ 0.3 and 0.5, θ 0.1 to 10 GB/s: 199 values,
# fewer than the plot's 600 pixel columns, so every point is drawn.  The accuracy of a point is
# at y = 330 - 240 * accuracy; the chosen θ's line sits at the answer's suggestion.
cal_match() { # cal_match SVG JSON
	svg=$1 json=$2
	[ "$(xpath "$svg" 'count(//*[@class="accuracy"])')" -eq 2 ] || { echo "not one curve per σ"; return 1; }
	best=$(jq '.suggestions[.best].theta' "$json")
	awk -v a="$best" -v b="$(xpath "$svg" 'string(//*[@data-theta]/@data-theta)')" 'BEGIN { exit !(a == b && a > 0) }' ||
		{ echo "chosen θ not the answer's $best"; return 1; }
	for sg in 0.3 0.5; do
		pts=$(xpath "$svg" "string(//*[@class=\"accuracy\"][number(@data-sigma) = $sg]/@points)")
		echo "$pts" | tr ' ' '\n' | awk -F, '{ print 330 - $2 }' > "$T/cal.y"
		jq -r --argjson s "$sg" '.points[] | select(.sigma == $s) | .accuracy * 240' "$json" > "$T/cal.a"
		[ "$(wc -l < "$T/cal.y")" -eq "$(wc -l < "$T/cal.a")" ] ||
			{ echo "σ $sg: $(wc -l < "$T/cal.y") points drawn, $(wc -l < "$T/cal.a") in the answer"; return 1; }
		paste "$T/cal.y" "$T/cal.a" | awk '{ d = $1 - $2; if (d < -0.06 || d > 0.06) { print "line " NR ": y " $1 ", accuracy " $2 / 240; bad = 1 } } END { exit bad }' || return 1
	done
	[ "$(xpath "$svg" 'count(//*[@class="fp"] | //*[@class="fn dash"])')" -eq 2 ] || { echo "no FP/FN curves"; return 1; }
	[ "$(xpath "$svg" 'count(//*[@class="suggestion"])')" -eq "$(jq '.suggestions | length' "$json")" ] ||
		{ echo "not one mark per suggestion"; return 1; }
}
for n in 1 100 10000; do
	awk -v n="$n" 'BEGIN { print "region,beneficial"; for (i = 0; i < n; i++) print i "," (i % 3 == 0) }' > "$T/labels$n.csv"
	CAL="calibrate synth$n --labels $T/labels$n.csv --theta 0.1:10:0.05 --sigma 0.3,0.5"
	t0=$(date +%s%N)
	check "pimctl calibrate --svg, $n regions" "$PIMCTL" $CAL --svg "$T/cal$n.svg"
	t1=$(date +%s%N)
	echo "     ($n regions: calibration and chart in $(( (t1 - t0) / 1000000 )) ms, $(wc -c < "$T/cal$n.svg") bytes)"
	check "the calibration chart of $n regions is well-formed" xmllint --noout "$T/cal$n.svg"
	"$PIMCTL" --json $CAL > "$T/cal$n.json"
	check "its curves match the answer: one per σ, every θ's accuracy, the chosen θ ($n regions)" \
		cal_match "$T/cal$n.svg" "$T/cal$n.json"
done
check "calibrate --json --svg: stdout stays JSON" sh -c "'$PIMCTL' --json $CAL --svg '$T/c2.svg' | jq -e .best"
check "calibrate --svg to a path that cannot be written: exit 1" sh -c \
	"'$PIMCTL' $CAL --svg '$T/no/such/cal.svg' 2>&1; [ \$? -eq 1 ]"

# ------------------------------------------------------------ JIT-Q
# FP32 sources: the PIM falls behind the accelerator, so the plan has stalls to draw.
JQ="jitq plan --model gpt-3-175B --format mx6 --from fp32 --mapping strided-opt"
"$PIMCTL" --json $JQ --per-block > "$T/jitq.json"
check "pimctl jitq plan --svg" "$PIMCTL" $JQ --svg "$T/jitq.svg"
check "the JIT-Q chart is well-formed" xmllint --noout "$T/jitq.svg"
"$PIMCTL" --json $JQ --per-block > "$T/jitq-again.json"
check "the rows per block carry their timeline (launch_s, ready_s, start_s)" \
	jq -e '[.phases[].blocks[] | select(.ready_s > .launch_s and .start_s >= 0)] | length > 0' "$T/jitq.json"
check "... also when the plan is answered again from pimd's cache" cmp "$T/jitq.json" "$T/jitq-again.json"
check "one accelerator mark per block and phase" [ "$(xpath "$T/jitq.svg" 'count(//*[@class="accel"])')" -eq \
	"$(jq '[.phases[].blocks[]] | length' "$T/jitq.json")" ]
check "one quantization on the PIM lane per block and phase" [ "$(xpath "$T/jitq.svg" 'count(//*[@class="quant"])')" -eq \
	"$(jq '[.phases[].blocks[]] | length' "$T/jitq.json")" ]
stalls=$(jq '[.phases[].blocks[] | select(.stall_s > 0)] | length' "$T/jitq.json")
check "a stall mark for each of the plan's $stalls stalls (FP32 outruns the PIM)" \
	[ "$(xpath "$T/jitq.svg" 'count(//*[@class="stall"])')" -eq "$stalls" -a "$stalls" -gt 0 ]
check "the memory JIT-Q's copies hold, beside the resident copies" [ \
	"$(xpath "$T/jitq.svg" 'string((//*[@class="mem"])[3]/@data-bytes)')" = "$(jq '.capacity.lp_jitq' "$T/jitq.json")" -a \
	"$(xpath "$T/jitq.svg" 'string((//*[@class="mem"])[1]/@data-bytes)')" = "$(jq '.capacity.lp_both' "$T/jitq.json")" ]
"$PIMCTL" $JQ > "$T/plan.txt"
"$PIMCTL" $JQ --svg "$T/jitq2.svg" > "$T/plan-svg.txt"
check "--svg leaves the printed plan as it was (one line more)" sh -c \
	"head -n -1 '$T/plan-svg.txt' | cmp - '$T/plan.txt' && tail -1 '$T/plan-svg.txt' | grep -q 'Chart written to $T/jitq2.svg'"
# a deep custom model: 2,000 blocks on one device, drawn in merged runs of consecutive blocks
JQBIG="jitq plan --layers 2000 --hidden 1024 --format mx6 --from bf16 --mapping strided-opt"
t0=$(date +%s%N)
check "jitq plan --svg, 2,000 blocks" "$PIMCTL" $JQBIG --svg "$T/jitq-big.svg"
t1=$(date +%s%N)
echo "     (2,000 blocks: plan and chart in $(( (t1 - t0) / 1000000 )) ms, $(wc -c < "$T/jitq-big.svg") bytes)"
check "the chart of 2,000 blocks is well-formed" xmllint --noout "$T/jitq-big.svg"
check "... and every block of both phases is in one accelerator mark" \
	[ "$(xpath "$T/jitq-big.svg" 'sum(//*[@class="accel"]/@data-blocks)')" -eq 4000 ]

# ------------------------------------------------------------ progress on a terminal
# script(1) runs pimctl on a pseudo-terminal; a pipe and --json must see no progress at all.
"$PIMCTL" model load tests/models/fault.json >/dev/null
HANG="profile fault --library $B/tests/models/hang.so --timeout-ms 1500"
script -q -c "'$PIMCTL' $HANG" /dev/null < /dev/null > "$T/tty.out" 2>&1
tr '\r' '\n' < "$T/tty.out" > "$T/tty.lines"
check "profile on a terminal: regions, repetitions, time run and the job's timeout" \
	grep -q 'job [0-9]* running: regions [0-9]*/[0-9]*, repetitions [0-9]*/[0-9]*, [0-9.]* s of its 1.5 s timeout' "$T/tty.lines"
check "the progress line is erased before the result" grep -q "$(printf '\033')\[KProfile job [0-9]* of fault: failed" \
	"$T/tty.lines"
"$PIMCTL" $HANG > "$T/pipe.out" 2>&1
check "profile into a pipe: no progress line" sh -c "! grep -q 'running: regions' '$T/pipe.out' && ! grep -q \"\$(printf '\r')\" '$T/pipe.out'"
check "... but the result" grep -q "Profile job [0-9]* of fault: failed" "$T/pipe.out"
script -q -c "'$PIMCTL' --json $HANG" /dev/null < /dev/null > "$T/json.out" 2>&1
check "--json on a terminal: no progress line" sh -c "! grep -q 'running: regions' '$T/json.out' && grep -q '\"state\"' '$T/json.out'"
BIGCAL="calibrate synth10000 --labels $T/labels10000.csv --theta 0.001:60:0.001"
script -q -c "'$PIMCTL' $BIGCAL" /dev/null < /dev/null > "$T/cal-tty.out" 2>&1
check "a long calibration on a terminal says what it waits for and how long" \
	grep -q "calibrating synth10000 against $T/labels10000.csv: [0-9.]* s" "$T/cal-tty.out"
"$PIMCTL" $BIGCAL > "$T/cal-pipe.out" 2>&1
check "... and nothing of it into a pipe" sh -c "! grep -q calibrating '$T/cal-pipe.out' && grep -q suggested '$T/cal-pipe.out'"
# 48 MiB of BF16 through the quantizer: a fraction of a second on a quick core, so pimd is
# stopped for a second while it works, well past the 0.3 s before the line appears
head -c $((4096 * 6144 * 2)) /dev/urandom > "$T/w.bf16"
QUANT="jitq quantize --format mx6 --shape 4096x6144 $T/w.bf16 $T/w.mx6"
script -q -c "'$PIMCTL' $QUANT" /dev/null < /dev/null > "$T/q-tty.out" 2>&1 &
QPID=$!
sleep 0.1
kill -STOP "$PID"
sleep 1
kill -CONT "$PID"
wait "$QPID"
check "a large quantize on a terminal: the file, its size and the time so far" \
	grep -q "$T/w.bf16: 48.0 MiB to pimd and back: [0-9.]* s" "$T/q-tty.out"
check "... erased before the result" grep -q "$(printf '\033')\[KWrote 18874368 bytes" "$T/q-tty.out"
"$PIMCTL" $QUANT > "$T/q-pipe.out" 2>&1
check "... and nothing of it into a pipe" sh -c "! grep -q 'to pimd and back' '$T/q-pipe.out' && grep -q '^Wrote 18874368 bytes' '$T/q-pipe.out'"

# ------------------------------------------------------------ the demo
# make demo's script with its own pimd: it prints the placement and leaves the three pictures.
DEMO_CHARTS="$T/demo" sh examples/demo.sh "$B" > "$T/demo.out" 2>&1
check "the demo prints the placement and the JIT-Q plan" sh -c \
	"grep -q 'Placement of decoder-block' '$T/demo.out' && grep -q 'Chart written to $T/demo/jitq-plan.svg' '$T/demo.out'"
check "... and names the three pictures it leaves" grep -q "^Pictures: $T/demo/placement.svg, $T/demo/calibration.svg, $T/demo/jitq-plan.svg" "$T/demo.out"
for f in placement calibration jitq-plan; do
	check "the demo's $f.svg is well-formed" xmllint --noout "$T/demo/$f.svg"
done
# Its command lines are bold on a terminal only: written to a file above, it writes no escape.
ESC=$(printf '\033')
check "the demo writes no terminal escape into a pipe or a file" sh -c "! grep -q '$ESC' '$T/demo.out'"
script -q -c "DEMO_CHARTS='$T/demo-tty' sh examples/demo.sh '$B'" /dev/null < /dev/null > "$T/demo-tty.out" 2>&1
check "... and shows its commands in bold on a terminal" grep -q "${ESC}\[1m\\$ pimctl status" "$T/demo-tty.out"

# ------------------------------------------------------------ a real browser
# Each chart rendered by headless Chromium: a screenshot written, no error on its console
# (Chromium reports every attribute it cannot use, e.g. "Error: <path> attribute d: ...").
render() { # render SVG
	rm -rf "$T/chromium"
	timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$T/chromium" \
		--enable-logging=stderr --v=0 --window-size=960,1100 --screenshot="$1.png" "file://$1" \
		>"$T/chromium.log" 2>&1
	grep -q 'bytes written to file' "$T/chromium.log" || { tail -5 "$T/chromium.log"; return 1; }
	if grep 'CONSOLE' "$T/chromium.log" | grep -qi 'error'; then grep CONSOLE "$T/chromium.log"; return 1; fi
	[ "$(wc -c < "$1.png")" -gt 10000 ] || { echo "screenshot of $(wc -c < "$1.png") bytes: blank?"; return 1; }
}
if command -v chromium >/dev/null 2>&1; then
	for f in p100 p10000 decoder cal100 cal10000 jitq jitq-big demo/calibration demo/jitq-plan; do
		check "Chromium renders $f.svg without errors" render "$T/$f.svg"
	done
else
	echo "SKIP Chromium is not installed (make deps installs it): charts not rendered in a browser"
fi

kill -TERM "$PID"; wait "$PID"; PID=
echo "charts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
