#!/bin/sh
# A cgroup per profiling job (pimd(8), Containment), end to end: pimd started inside a scratch
# cgroup v2 directory that stands for the subtree systemd delegates (Delegate=), then jobs whose
# processes try to outlive them.  Usage: tests/e2e/cgroup.sh BUILD_DIR
# Needs root and a writable cgroup2 mount; otherwise every check is counted as skipped, with the
# reason.  Limits (pids.max) are checked where the pids controller reaches the scratch cgroup.
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
PIMD=$B/pimd
PIMCTL=$B/pimctl
M=$B/tests/models
MJ=$(pwd)/tests/models
PID= CG= SLEEPER= T=

. "$(dirname "$0")/lib.sh"
skip=0
skip() { skip=$((skip + 1)); echo "SKIP $*"; }
summary() {
	echo "cgroup: $pass passed, $fail failed, $skip skipped"
	[ "$fail" -eq 0 ]
}

if [ "$(id -u)" != 0 ]; then
	skip "a cgroup per job: not root (creating a cgroup needs it); 16 checks not run"
	summary; exit
fi
MNT=$(findmnt -n -t cgroup2 -o TARGET 2>/dev/null | head -n 1)
if [ -z "$MNT" ] || ! mkdir "$MNT/pimd-test-$$" 2>/dev/null; then
	skip "a cgroup per job: no writable cgroup2 file system here (${MNT:-none mounted}); 16 checks not run"
	summary; exit
fi
CG=$MNT/pimd-test-$$
T=$(mktemp -d /tmp/pimd-cgroup.XXXXXX)
S=$T/pimd.sock

procs_of() { # the pids of a cgroup directory and of every one below it
	find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null
}
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$SLEEPER" ] && kill "$SLEEPER" 2>/dev/null
	if [ -d "$CG" ]; then
		echo 1 > "$CG/cgroup.kill" 2>/dev/null || for p in $(procs_of "$CG"); do kill -9 "$p"; done
		i=0; while [ -n "$(procs_of "$CG")" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
		find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT

wait_gone() { # wait_gone PATH: up to 3 s for a directory to disappear
	i=0; while [ -e "$1" ] && [ $i -lt 60 ]; do sleep 0.05; i=$((i + 1)); done
	[ ! -e "$1" ]
}
job_dirs() { ls -d "$CG"/job-* 2>/dev/null; }
no_jobs_left() { # up to 3 s for every job directory to go
	i=0; while [ -n "$(job_dirs)" ] && [ $i -lt 60 ]; do sleep 0.05; i=$((i + 1)); done
}
alive_pid() { # $1 when it is a process that is not a zombie
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -qv '^[ZX]' && echo "$1"
}
alive_named() { # processes named $1 that are not zombies
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = "$1" ] || continue
		sed 's/.*) //' "$p/stat" 2>/dev/null | grep -qv '^[ZX]' && echo "${p#/proc/}"
	done
}
none_alive() { # none_alive NAME: up to 3 s for every such process to end
	i=0; while [ -n "$(alive_named "$1")" ] && [ $i -lt 60 ]; do sleep 0.05; i=$((i + 1)); done
	[ -z "$(alive_named "$1")" ]
}
start_pimd() { # start_pimd CONFIG-TEXT: pimd started inside $CG, as a service manager would
	printf "$1" > "$T/pimd.conf"
	sh -c "echo \$\$ > '$CG/cgroup.procs' && exec '$PIMD' --foreground --socket '$S' \
		--state-dir '$T/state' --config '$T/pimd.conf'" 2>"$T/log" &
	PID=$!
	i=0; while ! "$PIMCTL" --socket "$S" status >/dev/null 2>&1 && [ $i -lt 200 ]; do
		kill -0 "$PID" 2>/dev/null || return 1; sleep 0.05; i=$((i + 1)); done
	[ $i -lt 200 ]
}
stop_pimd() {
	kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
}

# A job directory a previous pimd left, with a process in it: the next start kills and removes it.
mkdir "$CG/job-999999"
sh -c "echo \$\$ > '$CG/job-999999/cgroup.procs' && exec sleep 1000" &
SLEEPER=$!
i=0; while ! grep -qx "$SLEEPER" "$CG/job-999999/cgroup.procs" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
conf='allow_root_jobs = yes\njob_cgroups = yes\nprofile_max_processes = 32\n'
if ! start_pimd "$conf"; then
	bad "pimd starts inside a cgroup it is given (job_cgroups = yes)"
	summary; exit
fi
expect_rc 0 "contained:  a cgroup per job under /pimd-test-$$ (" \
	"pimctl status: a cgroup per job under the cgroup pimd started in" "$PIMCTL" --socket "$S" status
check "pimd moved itself into $CG/main (no process left in the delegated cgroup itself)" sh -c \
	"grep -qx '$PID' '$CG/main/cgroup.procs' && [ -z \"\$(cat '$CG/cgroup.procs')\" ]"
d="the job directory of a previous pimd is removed at start, its process killed"
if wait_gone "$CG/job-999999" && [ -z "$(alive_pid "$SLEEPER")" ]; then ok "$d"
else bad "$d (sleeper $SLEEPER: $(sed 's/.*) //' "/proc/$SLEEPER/stat" 2>/dev/null | cut -c1))"; fi
SLEEPER=

"$PIMCTL" --socket "$S" model load "$MJ/cgself.json" >/dev/null
"$PIMCTL" --socket "$S" model load "$MJ/fault.json" >/dev/null
# Region 1: the library's constructor already ran in job-N; region 2: so does a child it forks.
expect_rc 0 "regions with metrics 3/3" \
	"the worker is in its job's cgroup before the model's first code runs, its children too" \
	"$PIMCTL" --socket "$S" profile cgself --library "$M/cgself.so" --reps 2
JOB=$(sed -n 's/^Profile job \([0-9]*\).*/\1/p' "$T/out")
check "pimd logged the worker's cgroup job-$JOB" grep -q "worker pid [0-9]* as uid 0 in cgroup job-$JOB," "$T/log"
check "the job's cgroup is removed when the job ends" wait_gone "$CG/job-$JOB"

# Children that fork, setsid() and fork again, holding the result pipe (tests/models/escape.c).
expect_rc 0 "done (timing backend" "a model whose children try to outlive the job ends" \
	timeout 30 "$PIMCTL" --socket "$S" profile fault --library "$M/escape.so" --reps 3 --timeout-ms 20000
no_jobs_left
check "and its cgroup is removed" [ -z "$(job_dirs)" ]
if none_alive pimd-escapee; then ok "none of its children outlives the job"
else bad "none of its children outlives the job: pimd-escapee alive: $(alive_named pimd-escapee)"; fi

expect_rc 1 "wall-clock timeout of 500 ms exceeded" "a hanging model is killed at its timeout" \
	"$PIMCTL" --socket "$S" profile fault --library "$M/hang.so" --timeout-ms 500
no_jobs_left
check "and its cgroup is removed" [ -z "$(job_dirs)" ]

if grep -qw pids "$CG/cgroup.subtree_control"; then
	expect_rc 0 "refused [0-9]* fork(s) at its process limit (pids.max 32)" \
		"a fork bomb stops at the job's pids.max (profile_max_processes 32) and the job says so" \
		timeout 60 "$PIMCTL" --socket "$S" profile fault --library "$M/forkbomb.so" --reps 1 --warmups 0
	no_jobs_left
	check "every process of the fork bomb is dead and its cgroup removed" [ -z "$(job_dirs)" ]
else
	skip "pids.max of a job: the pids controller does not reach $CG here (cgroup.controllers: $(cat "$CG/cgroup.controllers")); 2 checks not run"
fi
stop_pimd
check "pimd stopped: no process and no job cgroup is left in the cgroup it was given" \
	[ -z "$(procs_of "$CG")$(job_dirs)" ]

# auto: a cgroup that is nobody's delegation (root's, no trusted.delegate) is left alone.
if start_pimd 'allow_root_jobs = yes\n'; then
	expect_rc 0 "contained:  a process group per job .*no cgroup: .*not delegated to pimd" \
		"job_cgroups = auto: a cgroup not delegated to pimd is not used, and status says why" \
		"$PIMCTL" --socket "$S" status
	expect_rc 0 "regions with metrics 1/3" "and then the worker runs in no job cgroup (cgself measures region 0 only)" \
		"$PIMCTL" --socket "$S" profile cgself --library "$M/cgself.so" --reps 1
	stop_pimd
else
	bad "pimd starts with job_cgroups = auto"
fi
summary
