#!/bin/sh
# A cgroup per profiling job (pimd(8), Containment), end to end: pimd started inside a scratch
# cgroup v2 directory that stands for the subtree systemd delegates (Delegate=), then jobs whose
# processes try to outlive them; then, where the pids and memory controllers are cgroup v1
# hierarchies (a hybrid or legacy host), pimd with job cgroups of its own there.
# Usage: tests/e2e/cgroup.sh BUILD_DIR
# Needs root and a writable cgroup2 mount or writable cgroup v1 pids and memory hierarchies;
# otherwise the checks are counted as skipped, with the reason.  Limits (pids.max, the memory
# limit) are checked where a pids or memory controller reaches the job.
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
PIMD=$B/pimd
PIMCTL=$B/pimctl
M=$B/tests/models
MJ=$(pwd)/tests/models
PID= CG= SLEEPER= T= V1P= V1M= V1F= STALE=

. "$(dirname "$0")/lib.sh"
skip=0
skip() { skip=$((skip + 1)); echo "SKIP $*"; }
summary() {
	echo "cgroup: $pass passed, $fail failed, $skip skipped"
	[ "$fail" -eq 0 ]
}

if [ "$(id -u)" != 0 ]; then
	skip "a cgroup per job: not root (creating a cgroup needs it); 34 checks not run"
	summary; exit
fi
v1_dir() { # v1_dir CONTROLLER: this shell's cgroup in that cgroup v1 hierarchy, if it is writable
	mnt=$(findmnt -n -t cgroup -O "$1" -o TARGET 2>/dev/null | head -n 1)
	[ -n "$mnt" ] && [ "$(findmnt -n -o FSROOT "$mnt")" = / ] || return
	path=$(awk -F: -v c="$1" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup)
	dir=$mnt${path%/}
	mkdir "$dir/pimd-probe-$$" 2>/dev/null && rmdir "$dir/pimd-probe-$$" && echo "$dir"
}
V1P=$(v1_dir pids) V1M=$(v1_dir memory) V1F=$(v1_dir freezer)
[ -n "$V1P" ] && [ -n "$V1M" ] || V1P= V1M= V1F=
MNT=$(findmnt -n -t cgroup2 -o TARGET 2>/dev/null | head -n 1)
if [ -n "$MNT" ] && mkdir "$MNT/pimd-test-$$" 2>/dev/null; then
	CG=$MNT/pimd-test-$$
elif [ -z "$V1P" ]; then
	skip "a cgroup per job: no writable cgroup2 file system (${MNT:-none mounted}) and no writable cgroup v1 pids and memory hierarchies here; 34 checks not run"
	summary; exit
fi
T=$(mktemp -d /tmp/pimd-cgroup.XXXXXX)
S=$T/pimd.sock

procs_of() { # the pids of a cgroup directory and of every one below it
	find "$@" -name cgroup.procs -exec cat {} + 2>/dev/null
}
kill_tree() { # kill_tree DIR...: every process below, then every directory, deepest first
	for p in $(procs_of "$@"); do kill -9 "$p" 2>/dev/null; done
	i=0; while [ -n "$(procs_of "$@")" ] && [ $i -lt 100 ]; do
		for p in $(procs_of "$@"); do kill -9 "$p" 2>/dev/null; done; sleep 0.05; i=$((i + 1)); done
	find "$@" -depth -type d -exec rmdir {} + 2>/dev/null
}
v1_owned() { # the owner directories of pimd $1 in the v1 hierarchies
	for h in "$V1P" "$V1M" "$V1F"; do [ -n "$h" ] && ls -d "$h/pimd-$1-"* 2>/dev/null; done
}
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$SLEEPER" ] && kill "$SLEEPER" 2>/dev/null
	if [ -d "$CG" ]; then
		echo 1 > "$CG/cgroup.kill" 2>/dev/null
		kill_tree "$CG"
	fi
	for d in $(v1_owned "$STALE") $(v1_owned "$PID"); do
		[ -n "$V1F" ] && echo THAWED > "$d/freezer.state" 2>/dev/null
		kill_tree "$d"
	done
	rm -rf "$T"
}
trap cleanup EXIT

# The waits below are hang guards (10 s): on a loaded machine a kill takes its time to show.
wait_gone() { # wait_gone PATH: up to 10 s for a directory to disappear
	i=0; while [ -e "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ ! -e "$1" ]
}
job_dirs() { # of cgroup v2 and v1
	[ -n "$CG" ] && ls -d "$CG"/job-* 2>/dev/null
	for d in $(v1_owned "$PID"); do ls -d "$d"/job-* 2>/dev/null; done
}
no_jobs_left() { # up to 10 s for every job directory to go
	i=0; while [ -n "$(job_dirs)" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
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
none_alive() { # none_alive NAME: up to 10 s for every such process to end
	i=0; while [ -n "$(alive_named "$1")" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ -z "$(alive_named "$1")" ]
}
start_pimd() { # start_pimd CONFIG-TEXT: pimd started inside $CG, as a service manager would
	printf "$1" > "$T/pimd.conf"
	sh -c "{ [ -z '$CG' ] || echo \$\$ > '$CG/cgroup.procs'; } && exec '$PIMD' --foreground \
		--socket '$S' --state-dir '$T/state' --config '$T/pimd.conf'" 2>"$T/log" &
	PID=$!
	i=0; while ! "$PIMCTL" --socket "$S" status >/dev/null 2>&1 && [ $i -lt 200 ]; do
		kill -0 "$PID" 2>/dev/null || return 1; sleep 0.05; i=$((i + 1)); done
	[ $i -lt 200 ]
}
stop_pimd() {
	kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
}

# The limits of a job, wherever they come from (pids.max 32; the memory limit 16 MiB + 64 MiB).
conf_limits='profile_max_processes = 32\nprofile_memory_bytes = 16777216\n'
check_escape() { # check_escape HOW: children that fork, setsid() and fork again, holding the
	# result pipe (tests/models/escape.c), die with the job
	expect_rc 0 "done (timing backend" "a model whose children try to outlive the job ends ($1)" \
		timeout 30 "$PIMCTL" --socket "$S" profile fault --library "$M/escape.so" --reps 3 --timeout-ms 20000
	no_jobs_left
	check "and its cgroups are removed ($1)" [ -z "$(job_dirs)" ]
	if none_alive pimd-escapee; then ok "none of its children outlives the job ($1)"
	else bad "none of its children outlives the job ($1): pimd-escapee alive: $(alive_named pimd-escapee)"; fi
}
check_limits() { # check_limits HOW: the fork bomb and the memory hog end at the job's limits
	if [ "$1" = v2 ] && ! grep -qw pids "$CG/cgroup.subtree_control" && [ -z "$V1P" ]; then
		skip "pids.max of a job: neither the v2 pids controller reaches $CG here (cgroup.controllers: $(cat "$CG/cgroup.controllers")) nor a writable v1 pids hierarchy; 3 checks not run"
	else
		# tests/models/forkbomb.c: region 0 only when fork() failed with EAGAIN (uid 0's
		# jobs have no RLIMIT_NPROC: the cgroup alone stops it), and the job says how often
		expect_rc 0 "regions with metrics 1/2" "a fork bomb ($1) runs until fork() fails" \
			timeout 60 "$PIMCTL" --socket "$S" profile fault --library "$M/forkbomb.so" --reps 1
		cp "$T/out" "$T/forkbomb"
		check "and the job says the cgroup refused its forks at pids.max 32 ($1)" \
			grep -q "refused [1-9][0-9]* fork(s) at its process limit (pids.max 32)" "$T/forkbomb"
		no_jobs_left
		check "every process of the fork bomb is dead and its cgroups removed ($1)" [ -z "$(job_dirs)" ]
	fi
	if [ "$1" = v2 ] && ! grep -qw memory "$CG/cgroup.subtree_control" && [ -z "$V1M" ]; then
		skip "the memory limit of a job: neither the v2 memory controller reaches $CG here nor a writable v1 memory hierarchy; 2 checks not run"
		return
	fi
	# tests/models/memhog.c: 1 GiB into a memfd, which RLIMIT_AS does not count
	memory_file=memory.limit_in_bytes
	[ "$1" = v2 ] && grep -qw memory "$CG/cgroup.subtree_control" && memory_file=memory.max
	expect_rc 1 "memory limit of the job's cgroup exceeded ($memory_file 83886080 bytes): the kernel killed [1-9]" \
		"a memory hog ($1) is killed at the job's memory limit (profile_memory_bytes + 64 MiB)" \
		timeout 60 "$PIMCTL" --socket "$S" profile fault --library "$M/memhog.so" --reps 1
	no_jobs_left
	check "and its cgroups are removed ($1)" [ -z "$(job_dirs)" ]
}

if [ -n "$CG" ]; then
# A job directory a previous pimd left, with a process in it: the next start kills and removes it.
mkdir "$CG/job-999999"
sh -c "echo \$\$ > '$CG/job-999999/cgroup.procs' && exec sleep 1000" &
SLEEPER=$!
i=0; while ! grep -qx "$SLEEPER" "$CG/job-999999/cgroup.procs" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
conf="allow_root_jobs = yes\njob_cgroups = yes\n$conf_limits"
if ! start_pimd "$conf"; then
	bad "pimd starts inside a cgroup it is given (job_cgroups = yes)"
	summary; exit
fi
expect_rc 0 "contained:  a cgroup per job under /pimd-test-$$ (" \
	"pimctl status: a cgroup per job under the cgroup pimd started in" "$PIMCTL" --socket "$S" status
if [ -n "$V1P" ] && ! grep -qw pids "$CG/cgroup.subtree_control"; then
	expect_rc 0 "contained:  a cgroup per job under /pimd-test-$$ (.*; and cgroup v1 pids+memory per job under pids:" \
		"pimctl status: and cgroup v1 pids+memory per job where cgroup v2 has no pids controller" \
		"$PIMCTL" --socket "$S" status
fi
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

check_escape v2

expect_rc 1 "wall-clock timeout of 500 ms exceeded" "a hanging model is killed at its timeout" \
	"$PIMCTL" --socket "$S" profile fault --library "$M/hang.so" --timeout-ms 500
no_jobs_left
check "and its cgroup is removed" [ -z "$(job_dirs)" ]

check_limits v2
owned=$(v1_owned "$PID" | tr '\n' ' ')
stop_pimd
check "pimd stopped: no process and no job cgroup is left in the cgroup it was given" \
	[ -z "$(procs_of "$CG")$(job_dirs)" ]
[ -n "$V1P" ] && check "pimd stopped: its cgroup v1 directories are removed" \
	sh -c "[ -n '$owned' ] && ! ls -d $owned 2>/dev/null"
else
	skip "a cgroup v2 per job: no writable cgroup2 file system here (${MNT:-none mounted}); 19 checks not run"
fi

# job_cgroups = auto, where no cgroup v2 is pimd's (in $CG: root's, no trusted.delegate): the
# cgroup v1 pids and memory hierarchies where pimd may write to them, else process groups.
if [ -z "$V1P" ]; then
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
	skip "a cgroup v1 per job: no writable cgroup v1 pids and memory hierarchies here; 15 checks not run"
	summary; exit
fi

# The owner directory of a pimd that died (no process has that pid and start time) with a job
# and its process in it, in the pids and memory hierarchies: the next start removes them.
STALE=$(sh -c 'echo $$')
mkdir -p "$V1P/pimd-$STALE-1/job-5" "$V1M/pimd-$STALE-1/job-5"
sh -c "echo \$\$ > '$V1P/pimd-$STALE-1/job-5/cgroup.procs' && echo \$\$ > '$V1M/pimd-$STALE-1/job-5/cgroup.procs' && exec sleep 1000" &
SLEEPER=$!
i=0; while ! grep -qx "$SLEEPER" "$V1M/pimd-$STALE-1/job-5/cgroup.procs" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
if ! start_pimd "allow_root_jobs = yes\n$conf_limits"; then
	bad "pimd starts with job_cgroups = auto"
	summary; exit
fi
why=" and a process group per job; no cgroup v2: .*not delegated to pimd"
[ -z "$CG" ] && why=" and a process group per job; no cgroup v2: "
expect_rc 0 "contained:  cgroup v1 pids+memory per job under pids:.*/pimd-$PID-[0-9]*, memory:.*/pimd-$PID-[0-9]* (pids.max, memory.limit_in_bytes;.*),$why" \
	"job_cgroups = auto without a cgroup v2 of pimd's: status says cgroup v1 pids+memory per job, and why not v2" \
	"$PIMCTL" --socket "$S" status
check "and so does the start log" grep -q "Profiling jobs are contained by cgroup v1 pids+memory per job" "$T/log"
check "pimd made its owner directory in the v1 pids and memory hierarchies" \
	sh -c "[ \$(ls -d '$V1P/pimd-$PID-'* '$V1M/pimd-$PID-'* | wc -l) -eq 2 ]"
d="the v1 job directories of a pimd that died are removed at start, their process killed"
if wait_gone "$V1P/pimd-$STALE-1" && wait_gone "$V1M/pimd-$STALE-1" && [ -z "$(alive_pid "$SLEEPER")" ]; then ok "$d"
else bad "$d (sleeper $SLEEPER: $(sed 's/.*) //' "/proc/$SLEEPER/stat" 2>/dev/null | cut -c1))"; fi
SLEEPER=

"$PIMCTL" --socket "$S" model load --replace "$MJ/fault.json" >/dev/null
"$PIMCTL" --socket "$S" profile fault --library "$M/hang.so" --timeout-ms 4000 >/dev/null 2>&1 &
HANG=$!
i=0; while ! W=$(sed -n 's/.*worker pid \([0-9]*\) as uid 0 in cgroup job-\([0-9]*\),.*/\1/p' "$T/log" | tail -n 1) || [ -z "$W" ]; do
	[ $i -lt 100 ] || break; sleep 0.05; i=$((i + 1)); done
check "the worker runs in its job's cgroup in the v1 pids and memory hierarchies" sh -c \
	"grep -q ':pids:.*/pimd-$PID-[0-9]*/job-[0-9]*\$' /proc/$W/cgroup && grep -q ':memory:.*/pimd-$PID-[0-9]*/job-[0-9]*\$' /proc/$W/cgroup"
wait "$HANG"
no_jobs_left
check "a hanging model is killed at its timeout, its v1 cgroups removed" [ -z "$(job_dirs)" ]

check_escape v1

check_limits v1
owned=$(v1_owned "$PID" | tr '\n' ' ')
stop_pimd
check "pimd stopped: its owner directories in the v1 hierarchies are removed" \
	sh -c "[ -n '$owned' ] && ! ls -d $owned 2>/dev/null"
summary
