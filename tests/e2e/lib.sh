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
