# Helpers of the end-to-end scripts (sourced): counted checks whose output goes to $T/out and,
# on failure, is shown with the tail of the daemon's log $T/log.
pass=0
fail=0
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
# pimd's event loop never queries the database: the daemon whose log is $T/log, once stopped,
# logged no SQL statement run there (store_guard_thread).
no_loop_sql() { # no_loop_sql [WHICH]
	check "pimd's event loop ran no SQL statement${1:+ ($1)}" sh -c "! grep 'event loop ran' '$T/log'"
}
# Timing goals (a p99 bound, "gone within 2 s") are checked where PIMD_E2E_GOALS is set (make
# stress, make check-bcpu); make check runs on machines under any load, so there a measurement
# is printed and fails only past a generous hang guard.  goal GOAL GUARD prints the bound to use.
goal() { if [ -n "${PIMD_E2E_GOALS:-}" ]; then echo "$1"; else echo "$2"; fi; }
# measure DESCRIPTION COMMAND...: check, and print the figures of the command's output (its
# lines with a p99 or a time taken) on success too.
measure() {
	d=$1; shift
	if "$@" >"$T/out" 2>&1; then ok "$d"; grep -E 'p99|took' "$T/out" | sed 's/^/     : /'
	else bad "$d"; sed 's/^/     > /' "$T/out"; fi
}
# pimd's own writes wait on its writer thread, never on the event loop: with the database's
# write lock held HOLD_MS by another process (as a slow disk would hold a commit), status keeps a
# p99 under P99_MS while profile job JOB's samples, an in-situ batch (of model three-regions)
# and a new placement answer wait, and what is acknowledged is stored.
writes_wait() { # writes_wait SOCKET DB JOB HOLD_MS P99_MS
	s=$(($4 / 1000))
	measure "status is served while a profiling job's samples wait $s s for the database (p99 < $5 ms); none lost" \
		"$TOOL" samples-wait "$1" "$2" "${3:-0}" "$4" "$5"
	measure "status is served while an in-situ batch waits $s s for the database (p99 < $5 ms); answered once stored; a closed connection's batch stored" \
		"$TOOL" insitu-wait "$1" "$2" three-regions "$4" "$5"
	measure "a placement query is answered at once while its answer waits $s s to be stored (status p99 < $5 ms)" \
		"$TOOL" decision-wait "$1" "$2" three-regions "$4" "$5"
}
