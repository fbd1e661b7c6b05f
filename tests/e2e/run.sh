#!/bin/sh
# End-to-end tests of pimd, pimctl and libpimclient.  Usage: tests/e2e/run.sh BUILD_DIR
# Starts the real pimd in a temporary directory, by itself and under systemd-socket-activate.
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
PIMD=$B/pimd
PIMCTL=$B/pimctl
TOOL=$B/tests/e2e-tool
EXAMPLE=$(pwd)/examples/decoder-block.json
T=$(mktemp -d /tmp/pimd-e2e.XXXXXX)
pass=0
fail=0
PID=

cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; [ -f "$T/log" ] && sed 's/^/     | /' "$T/log" | tail -20; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@" >"$T/out" 2>&1; then ok "$d"; else bad "$d"; sed 's/^/     > /' "$T/out"; fi
}
expect_rc() { # expect_rc RC PATTERN DESCRIPTION COMMAND...
	want=$1 pat=$2 d=$3; shift 3
	"$@" >"$T/out" 2>&1
	rc=$?
	if [ "$rc" -eq "$want" ] && grep -q -- "$pat" "$T/out"; then ok "$d"
	else bad "$d (exit $rc, want $want, pattern '$pat')"; sed 's/^/     > /' "$T/out"; fi
}
wait_socket() {
	i=0
	while [ ! -S "$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ -S "$1" ]
}
wait_ready() { # the daemon answers at $1
	i=0
	while ! "$PIMCTL" --socket "$1" status >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ $i -lt 100 ]
}
wait_exit() { # wait_exit PID → sets RC
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	wait "$1"
	RC=$?
}

S=$T/pimd.sock
printf 'log_level = debug\nmax_clients = 64\nmax_requests_in_flight = 4\nmax_pending_bytes = 64K\n' > "$T/pimd.conf"

# ------------------------------------------------------------ pimd by itself
"$PIMD" --foreground --socket "$S" --state-dir "$T/state" --config "$T/pimd.conf" 2>"$T/log" &
PID=$!
if wait_socket "$S"; then ok "pimd binds its socket"; else bad "pimd binds its socket"; exit 1; fi
check "socket mode is 0660" sh -c "[ \"\$(stat -c %a '$S')\" = 660 ]"

expect_rc 0 "pimd 0.1.0" "pimctl status" "$PIMCTL" --socket "$S" status
NMIG=$(ls sql/[0-9][0-9][0-9][0-9]-*.sql | wc -l)
expect_rc 0 "\"schema_version\":$NMIG" "pimctl --json status (schema = number of migrations)" \
	"$PIMCTL" --socket "$S" --json status
expect_rc 0 "Loaded model decoder-block: 9 regions, 12 allocations" "pimctl model load" \
	"$PIMCTL" --socket "$S" model load "$EXAMPLE"
expect_rc 1 'exists; remove it first' "duplicate load is a daemon error (exit 1)" \
	"$PIMCTL" --socket "$S" model load "$EXAMPLE"
expect_rc 0 "Replaced model decoder-block" "model load --replace" \
	"$PIMCTL" --socket "$S" model load "$EXAMPLE" --replace
expect_rc 0 "decoder-block .* 9 .* 12" "pimctl model list" "$PIMCTL" --socket "$S" model list
expect_rc 0 "qkv.matvec .*linalg.matvec .* 768 .* 196608" "pimctl model show" \
	"$PIMCTL" --socket "$S" model show decoder-block
expect_rc 0 '"n_total":196608' "pimctl --json model show" \
	"$PIMCTL" --socket "$S" --json model show decoder-block
expect_rc 1 'no model named "nope"' "show of a missing model (exit 1)" \
	"$PIMCTL" --socket "$S" model show nope
printf '{ "name": "x", "allocations": [], "regions": [] }' > "$T/bad.json"
expect_rc 1 "allocations: a manifest needs at least one allocation" "invalid manifest named field" \
	"$PIMCTL" --socket "$S" model load "$T/bad.json"
expect_rc 2 "unknown command 'frob'" "usage error (exit 2)" "$PIMCTL" --socket "$S" frob
expect_rc 2 "expected exactly one NAME" "usage error in subcommand (exit 2)" \
	"$PIMCTL" --socket "$S" model show
expect_rc 3 "cannot connect to pimd at $T/nowhere.sock" "no daemon (exit 3) names the path" \
	"$PIMCTL" --socket "$T/nowhere.sock" status
expect_rc 0 "pimd 0.1.0" "PIMD_SOCKET is honoured" env PIMD_SOCKET="$S" "$PIMCTL" status
expect_rc 0 "Usage: pimctl" "pimctl --help" "$PIMCTL" --help

check "libpimclient end to end" "$TOOL" client "$S" "$EXAMPLE"
check "hostile frames from 32 clients; good client served" "$TOOL" hostile "$S" 32
check "5000 pipelined requests under a 4-in-flight limit, answered in order" "$TOOL" pipeline "$S" 5000
expect_rc 0 "decoder-block" "daemon still serves after hostile clients" "$PIMCTL" --socket "$S" model list

# ------------------------------------------------------------ placement (imported counts)
D=$(pwd)/tests/e2e/data
expect_rc 0 "Imported region 1 of decoder-block: T_host 50.00 us, n_rd 12288 (BW_read 15.73 GB/s)" \
	"import-perf stores counts per execution" \
	"$PIMCTL" --socket "$S" import-perf decoder-block 1 "$D/qkv-matvec.csv" --executions 100
printf '1234,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,100,100.00,,\n<not supported>,,icx::EXE_ACTIVITY:BOUND_ON_STORES,0,100.00,,\n' > "$T/bad.csv"
expect_rc 1 "BOUND_ON_STORES" "import-perf names an event that was not counted" \
	"$PIMCTL" --socket "$S" import-perf decoder-block 1 "$T/bad.csv" --time 0.001
expect_rc 1 "has no region 99" "import-perf of an unknown region" \
	"$PIMCTL" --socket "$S" import-perf decoder-block 99 "$D/qkv-matvec.csv"
expect_rc 1 "no duration_time or task-clock" "import-perf without a time needs --time" \
	sh -c "grep -v duration_time '$D/qkv-matvec.csv' > '$T/notime.csv' && '$PIMCTL' --socket '$S' import-perf decoder-block 1 '$T/notime.csv'"
expect_rc 0 "qkv.matvec .* yyyn  PIM  C3: BW_read 15.73 GB/s >= θ 2.01 GB/s" "placement table: the gemv nest passes C3" \
	"$PIMCTL" --socket "$S" placement decoder-block --cores 32,64,128
expect_rc 0 "(stored answer)" "a repeated query is answered from the store" \
	"$PIMCTL" --socket "$S" placement decoder-block --cores 32,64,128
expect_rc 0 "qkv.matvec .* yynn  host Stage 2 failed" "a changed parameter recomputes (theta 20 GB/s)" \
	"$PIMCTL" --socket "$S" placement decoder-block --param theta=20e9
expect_rc 0 '"speedup":' "placement --json" "$PIMCTL" --socket "$S" --json placement decoder-block --summary
expect_rc 0 "resident: 2 transitions" "movement model resident" \
	"$PIMCTL" --socket "$S" placement decoder-block --movement resident --summary
expect_rc 1 "granularity \"tiles\" is not one of" "a bad granularity is refused" \
	"$PIMCTL" --socket "$S" placement decoder-block --granularity tiles
expect_rc 1 "invalid placement parameter sigma" "a bad parameter is refused" \
	"$PIMCTL" --socket "$S" placement decoder-block --param sigma=2
expect_rc 2 "unknown parameter 'nope'" "an unknown parameter is a usage error" \
	"$PIMCTL" --socket "$S" placement decoder-block --param nope=1
printf 'region,beneficial\n1,1\n2,0\nqkv.fill,no\n' > "$T/labels.csv"
expect_rc 0 "suggested sigma 0.40: theta" "calibrate sweeps theta against labels" \
	"$PIMCTL" --socket "$S" calibrate decoder-block --labels "$T/labels.csv"
printf 'region,beneficial\n1,1\n1,0\n' > "$T/dup.csv"
expect_rc 1 "line 3" "calibrate names the bad label line" \
	"$PIMCTL" --socket "$S" calibrate decoder-block --labels "$T/dup.csv"
check "libpimclient decided path" "$TOOL" decided "$S" decoder-block

# a second pimd must not steal the socket
expect_rc 1 "another pimd is serving this socket" "second pimd refuses a live socket" \
	"$PIMD" --foreground --socket "$S" --state-dir "$T/state2"

# SIGHUP: a good config is applied, a bad one is refused and the old one kept
printf 'log_level = debug\nmax_clients = 1\n' > "$T/pimd.conf"
kill -HUP "$PID"; sleep 0.3
check "SIGHUP reloads the configuration" grep -q "Configuration reloaded" "$T/log"
expect_rc 0 "pimd 0.1.0" "max_clients = 1 still admits one client" "$PIMCTL" --socket "$S" status
check "over max_clients a client gets ERROR_BUSY" "$TOOL" busy "$S"
printf 'bogus = 1\n' > "$T/pimd.conf"
kill -HUP "$PID"; sleep 0.3
check "a bad config on SIGHUP is refused with its line" grep -q 'Reload failed.*pimd.conf:1: unknown key "bogus"' "$T/log"
expect_rc 0 "pimd 0.1.0" "daemon serves after a failed reload" "$PIMCTL" --socket "$S" status
check "log lines carry <N> priority prefixes" grep -q '^<6>pimd 0.1.0 ready' "$T/log"

kill -TERM "$PID"; wait_exit "$PID"; PID=
check "SIGTERM stops pimd with status 0" [ "$RC" -eq 0 ]
check "the socket is removed on exit" [ ! -e "$S" ]
check "the store is intact" sh -c "[ \"\$(sqlite3 '$T/state/pimd.db' 'PRAGMA integrity_check')\" = ok ]"

# ------------------------------------------------------------ stale socket, newer schema, bad config
make_stale_socket() { # leave a socket file with nobody listening: start and kill -9
	"$PIMD" --foreground --socket "$S" --state-dir "$T/state" 2>/dev/null &
	p=$!; wait_socket "$S"; kill -9 $p; wait $p 2>/dev/null
}
make_stale_socket
"$PIMD" --foreground --socket "$S" --state-dir "$T/state" 2>"$T/log" &
PID=$!
if wait_ready "$S"; then ok "a stale socket is replaced"
else bad "a stale socket is replaced"; fi
expect_rc 0 "decoder-block" "models survive kill -9 and restart" "$PIMCTL" --socket "$S" model list
kill -TERM "$PID"; wait_exit "$PID"; PID=

V=$(sqlite3 "$T/state/pimd.db" 'PRAGMA user_version')
sqlite3 "$T/state/pimd.db" 'PRAGMA user_version = 99'
expect_rc 1 "schema version 99 is newer than this pimd knows" "a newer database is refused" \
	"$PIMD" --foreground --socket "$S" --state-dir "$T/state"
sqlite3 "$T/state/pimd.db" "PRAGMA user_version = $V"
printf 'max_frame_bytes = 12\n' > "$T/bad.conf"
expect_rc 1 "bad.conf:1: max_frame_bytes" "a bad config file stops start-up" \
	"$PIMD" --foreground --socket "$S" --state-dir "$T/state" --config "$T/bad.conf"
expect_rc 1 "No such file" "an explicit missing config is an error" \
	"$PIMD" --foreground --socket "$S" --state-dir "$T/state" --config "$T/missing.conf"
expect_rc 2 "unrecognized option" "pimd usage error" "$PIMD" --frobnicate

# ------------------------------------------------------------ detached pimd
env -u NOTIFY_SOCKET -u LISTEN_FDS -u INVOCATION_ID \
	"$PIMD" --socket "$S" --state-dir "$T/state" 2>"$T/log"
check "without --foreground pimd detaches and the starter exits 0" [ $? -eq 0 ]
wait_ready "$S"
DPID=$("$PIMCTL" --socket "$S" --json status | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
check "the detached daemon reports its pid" [ -n "$DPID" ]
kill -TERM "$DPID"
i=0; while kill -0 "$DPID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
check "a detached pimd stops on SIGTERM" [ $i -lt 100 ]
check "and removes its socket" [ ! -e "$S" ]

# ------------------------------------------------------------ sd_notify protocol
"$TOOL" notify "$T/notify.sock" 10 > "$T/notify.out" &
NPID=$!
sleep 0.2
NOTIFY_SOCKET=$T/notify.sock WATCHDOG_USEC=200000 \
	"$PIMD" --socket "$S" --state-dir "$T/state" 2>"$T/log" &
PID=$!
wait_socket "$S"
"$PIMCTL" --socket "$S" status >/dev/null 2>&1
sleep 0.4
kill -TERM "$PID"; wait_exit "$PID"; PID=
wait "$NPID"
check "READY=1 is sent" grep -q '^READY=1' "$T/notify.out"
check "STATUS= describes the state" grep -q '^STATUS=Serving .* clients\?, 1 model' "$T/notify.out"
check "WATCHDOG=1 at half the interval" sh -c "[ \$(grep -c '^WATCHDOG=1' '$T/notify.out') -ge 2 ]"
check "STOPPING=1 on SIGTERM" grep -q '^STOPPING=1' "$T/notify.out"
check "stays in the foreground under systemd (exit status 0)" [ "$RC" -eq 0 ]

# ------------------------------------------------------------ socket activation
if command -v systemd-socket-activate >/dev/null 2>&1; then
	SA=$T/activated.sock
	systemd-socket-activate -l "$SA" "$PIMD" --state-dir "$T/state" 2>"$T/log" &
	PID=$!
	wait_socket "$SA"
	expect_rc 0 "socket:     $SA" "socket-activated pimd answers pimctl" "$PIMCTL" --socket "$SA" status
	check "it says it took the socket from systemd" grep -q "socket from systemd" "$T/log"
	check "hostile clients under socket activation" "$TOOL" hostile "$SA" 8
	kill -TERM "$PID"; wait_exit "$PID"; PID=
	check "socket-activated pimd exits 0 on SIGTERM" [ "$RC" -eq 0 ]
else
	bad "systemd-socket-activate is missing (package systemd)"
fi

echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
