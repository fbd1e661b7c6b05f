#!/bin/sh
# B_cpu, the host read bandwidth θ derives from (pimd(8), B_cpu):
# a fresh store started while two CPU spinners and a memory-bandwidth hog run measures within
# 10% of a quiet one, and says the machine was busy; the figure is kept across restarts,
# measured again when the stored one came from the old single-pass probe or another host, and
# on request (pimctl platform probe: root or pimd's user only).
# Usage: tests/e2e/bcpu.sh BUILD_DIR [ROUNDS]   (ROUNDS quiet/loaded/quiet comparisons, default 1;
# the 10% goal is checked with PIMD_E2E_GOALS=1, as make check-bcpu and make stress run it)
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
ROUNDS=${2:-1}
PIMD=$B/pimd
PIMCTL=$B/pimctl
TOOL=$B/tests/e2e-tool
T=$(mktemp -d /tmp/pimd-bcpu.XXXXXX)
PID=
LOAD=

load_stop() {
	for p in $LOAD; do kill "$p" 2>/dev/null; done
	for p in $LOAD; do wait "$p" 2>/dev/null; done
	LOAD=
}
cleanup() {
	load_stop
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

. "$(dirname "$0")/lib.sh"

# start NAME: pimd on the store $T/NAME (its socket $T/NAME.sock, its log $T/NAME.log), ready
start() {
	"$PIMD" --foreground --socket "$T/$1.sock" --state-dir "$T/$1" 2>"$T/$1.log" &
	PID=$!
	i=0
	while ! "$PIMCTL" --socket "$T/$1.sock" status >/dev/null 2>&1 && [ $i -lt 600 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ $i -lt 600 ]
}
stop() {
	kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	PID=
}
# b_cpu NAME: the measured B_cpu of the running pimd of store NAME, B/s
b_cpu() {
	"$PIMCTL" --socket "$T/$1.sock" --json status | tr -d ' \n' |
		sed -n 's/.*"b_cpu_probe":{[^}]*"measured":\([0-9.e+]*\).*/\1/p'
}
# fresh NAME: starts pimd on a fresh store NAME, prints its B_cpu and stops it
fresh() {
	start "$1" || { echo 0; return; }
	b_cpu "$1"
	"$PIMCTL" --socket "$T/$1.sock" status > "$T/$1.status"
	stop
}
load_start() {
	sh -c 'while :; do :; done' & LOAD="$LOAD $!"
	sh -c 'while :; do :; done' & LOAD="$LOAD $!"
	"$TOOL" hog 256 & LOAD="$LOAD $!"
	sleep 0.5 # the hog's buffers are written once first
}

# ------------------------------------------------------------ under load, as quiet
r=0
while [ $r -lt "$ROUNDS" ]; do
	r=$((r + 1))
	q1=$(fresh quiet1-$r)
	load_start
	l=$(fresh loaded-$r)
	load_stop
	q2=$(fresh quiet2-$r)
	# against the mean of a quiet store measured before and one after: the host's own drift
	# (other guests of this machine) is not what the test is about
	ratio=$(awk -v l="$l" -v a="$q1" -v b="$q2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", 2 * l / (a + b); else print 0 }')
	echo "     round $r: quiet $(awk -v x="$q1" 'BEGIN { printf "%.2f", x / 1e9 }') GB/s," \
		"loaded $(awk -v x="$l" 'BEGIN { printf "%.2f", x / 1e9 }') GB/s," \
		"quiet $(awk -v x="$q2" 'BEGIN { printf "%.2f", x / 1e9 }') GB/s: ratio $ratio" \
		"(to each: $(awk -v l="$l" -v a="$q1" -v b="$q2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f %.3f", l / a, l / b }'))"
	# The goal, within 10%, is checked by make check-bcpu and make stress (PIMD_E2E_GOALS): under
	# make check other work loads the machine too, and "quiet" is not quiet; there the figure is
	# printed, and a store that measured nothing fails.
	if [ -n "${PIMD_E2E_GOALS:-}" ]; then
		check "round $r: a fresh store under 2 spinners and a memory hog measures B_cpu within 10% of quiet ones ($ratio)" \
			awk -v x="$ratio" 'BEGIN { exit !(x >= 0.9 && x <= 1.1) }'
	else
		check "round $r: fresh stores measure B_cpu, quiet and under 2 spinners and a memory hog (ratio $ratio; goal 0.9-1.1 in make check-bcpu)" \
			awk -v x="$ratio" 'BEGIN { exit !(x > 0) }'
	fi
	T_LOG=$T/loaded-$r.status
	check "round $r: and says the machine was busy while it measured" grep -q "busy: .* runnable tasks on" "$T_LOG"
done

# ------------------------------------------------------------ kept, measured again when stale
N=kept
start $N || bad "pimd starts on a fresh store"
expect_rc 0 "B_cpu:      [0-9.]* GB/s (measured)" "status shows the measured B_cpu" \
	"$PIMCTL" --socket "$T/$N.sock" status
expect_rc 0 "spread [0-9.]*% between rounds" "with its spread, date and method" \
	"$PIMCTL" --socket "$T/$N.sock" status
expect_rc 0 '"method":"1 thread, 90th percentile of' "--json status carries the probe" \
	sh -c "'$PIMCTL' --socket '$T/$N.sock' --json status | tr -d '\n' | sed 's/\": /\":/g'"
first=$(b_cpu $N)
stop
start $N
check "a restart keeps the stored B_cpu" sh -c "[ '$(b_cpu $N)' = '$first' ] && ! grep -q 'Measur' '$T/$N.log'"
stop
DB=$T/$N/pimd.db
sqlite3 "$DB" "UPDATE platforms SET b_cpu_method = NULL" 2>"$T/out"
start $N
check "a B_cpu of the single-pass probe of an earlier pimd is measured again" \
	grep -q "Measuring B_cpu again: the stored B_cpu comes from the single-pass probe" "$T/$N.log"
stop
sqlite3 "$DB" "UPDATE platforms SET b_cpu_host = '64 CPUs, 1024.0 GiB'" 2>"$T/out"
start $N
check "a B_cpu measured on another host (CPUs, memory) is measured again" \
	grep -q "Measuring B_cpu again: the host changed since B_cpu was measured (stored: .* on 64 CPUs, 1024.0 GiB)" "$T/$N.log"
check "and stored with the host" sh -c "[ \"\$(sqlite3 '$DB' 'SELECT b_cpu_host FROM platforms')\" != '64 CPUs, 1024.0 GiB' ]"

# ------------------------------------------------------------ on request
expect_rc 0 "B_cpu measured: [0-9.]* GB/s (was [0-9.]* GB/s" "pimctl platform probe measures B_cpu again" \
	"$PIMCTL" --socket "$T/$N.sock" platform probe
at=$(sqlite3 "$DB" "SELECT b_cpu_measured_at FROM platforms")
expect_rc 0 '"previous":{.*"probe":{.*"measured":' "pimctl --json platform probe" \
	sh -c "'$PIMCTL' --socket '$T/$N.sock' --json platform probe | tr -d ' \n'"
probed=$(tr -d ' \n' < "$T/out" | sed -n 's/.*"probe":{"b_cpu":\([0-9.e+]*\),.*/\1/p')
check "answers use the new figure" sh -c "'$PIMCTL' --socket '$T/$N.sock' --json status | tr -d ' \n' | grep -q '\"b_cpu\":$probed,\"b_cpu_source\":\"measured\"'"
sleep 0.3 # the writer thread stores it
check "and it is stored" sh -c "[ \"\$(sqlite3 '$DB' 'SELECT b_cpu FROM platforms')\" != '$first' ] && [ \"\$(sqlite3 '$DB' 'SELECT b_cpu_measured_at FROM platforms')\" -ge '$at' ]"
expect_rc 0 "daemon serves" "status is answered while a probe runs (the probe is off the event loop)" \
	sh -c "'$PIMCTL' --socket '$T/$N.sock' platform probe >/dev/null & sleep 0.3; t0=\$(date +%s%N); '$PIMCTL' --socket '$T/$N.sock' status >/dev/null && t1=\$(date +%s%N) && [ \$(((t1 - t0) / 1000000)) -lt 500 ] && echo daemon serves; wait"
expect_rc 2 "platform: unknown or missing subcommand (probe)" "pimctl platform without probe is a usage error" \
	"$PIMCTL" --socket "$T/$N.sock" platform
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 0755 "$T"
	chmod 0666 "$T/$N.sock"
	mkdir -m 0755 "$T/nobody" && cp "$PIMCTL" "$T/nobody/" && chmod a+rx "$T/nobody/pimctl"
	expect_rc 1 "only root or pimd's own user (uid 0) may ask, not uid 65534" \
		"another user may not measure B_cpu again (it changes every user's answers)" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$T/nobody/pimctl" --socket "$T/$N.sock" platform probe
	chmod 0700 "$T"
fi
stop

echo "bcpu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
