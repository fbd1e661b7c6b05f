#!/bin/sh
# The fleet catalogue end to end (make check-fleet): run under pg_virtualenv, which gives a
# throw-away PostgreSQL cluster in PGHOST, PGPORT, PGUSER, PGPASSWORD and PG_CLUSTER_CONF_ROOT.
# Usage: pg_virtualenv -t sh tests/e2e/fleet.sh BUILD_DIR
#
# pimd instances with state directories of their own share one catalogue: A profiles, B places
# the same manifest (loaded under another name) without profiling and decides as A did;
# PostgreSQL stopped while A publishes loses nothing; another platform key gets no match; wrong
# credentials and an unreachable catalogue say so while pimd answers from its own store;
# imported counts are published as imported, with the uid, and never preferred over a
# measurement.  B's first answer, computed from the rows it fetched while they are stored, is
# the answer its store gives afterwards, also after a restart without the catalogue; rows that
# cannot be stored are asked for again.
set -u
B=${1:-build}
B=$(cd "$B" && pwd)
PIMD=$B/pimd
PIMCTL=$B/pimctl
M=$B/tests/models
MJ=$(pwd)/tests/models
D=$(pwd)/tests/e2e/data
T=$(mktemp -d /tmp/pimd-fleet.XXXXXX)
PIDS=

if [ -z "${PG_CLUSTER_CONF_ROOT:-}" ] || [ -z "${PGPASSWORD:-}" ]; then
	echo "fleet.sh: run me under pg_virtualenv (make check-fleet)" >&2
	exit 2
fi
# pg_virtualenv's cluster: 15/regress (or the version it runs)
PGVER=$(ls "$PG_CLUSTER_CONF_ROOT")
PGCL=$(ls "$PG_CLUSTER_CONF_ROOT/$PGVER")

cleanup() {
	[ -n "${FLEET_KEEP:-}" ] && cp -r "$T" "$FLEET_KEEP"
	for p in $PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	pg_ctlcluster "$PGVER" "$PGCL" start >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"

sql() { psql -XtAq -c "$1" 2>&1; }
wait_ready() { # the daemon answers at $1
	i=0
	while ! "$PIMCTL" --socket "$1" status >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	[ $i -lt 600 ]
}
# The password is in a credentials file that only pimd's user reads (PGPASSFILE), never in
# pimd.conf nor in pimd's environment.
printf '*:*:*:%s:%s\n' "$PGUSER" "$PGPASSWORD" > "$T/pgpass"
printf '*:*:*:%s:wrong-%s\n' "$PGUSER" "$PGPASSWORD" > "$T/pgpass-wrong"
chmod 600 "$T/pgpass" "$T/pgpass-wrong"
URI="postgresql://$PGUSER@$PGHOST:$PGPORT/$PGDATABASE?sslmode=prefer"

# start_pimd NAME HOST_ID [EXTRA CONFIG LINE] [PGPASSFILE]: pimd NAME on $T/NAME.sock
start_pimd() {
	printf 'catalogue = %s\ncatalogue_host_id = %s\ncatalogue_timeout_ms = 3000\nb_cpu = 10e9\nallow_root_jobs = yes\nlog_level = debug\n%s\n' \
		"$URI" "$2" "${3:-}" > "$T/$1.conf"
	env -u PGPASSWORD PGPASSFILE="${4:-$T/pgpass}" "$PIMD" --foreground --socket "$T/$1.sock" \
		--state-dir "$T/$1" --config "$T/$1.conf" 2>"$T/$1.log" &
	PIDS="$PIDS $!"
	eval "PID_$1=$!"
	wait_ready "$T/$1.sock"
}
ctl() { n=$1; shift; "$PIMCTL" --socket "$T/$n.sock" "$@"; }
# wait_published NAME N: NAME's outbox is empty and it has published N rows since it started
# (its status is as of the publisher's last look: the count tells a new row from an old one)
wait_published() {
	i=0
	while [ $i -lt 300 ]; do
		st=$(ctl "$1" --json catalogue status 2>/dev/null)
		[ "$(echo "$st" | jq -r '.outbox_depth')" = 0 ] && [ "$(echo "$st" | jq -r '.reachable')" = true ] &&
			[ "$(echo "$st" | jq -r '.published + .conflicts')" -ge "$2" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
decisions() { jq -c '[.estimates[0].regions[] | {id: .region_id, pim: .pim}]' "$1"; }
# wait_reachable NAME: its catalogue status says reachable (10 s at most)
wait_reachable() {
	i=0
	while [ $i -lt 100 ]; do
		ctl "$1" catalogue status >/dev/null 2>&1 && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
json_is() { jq -e "$2" "$1" >/dev/null; } # json_is FILE FILTER
psql_is() { [ "$(psql -XtAq -c "$1")" = "$2" ]; } # psql_is QUERY EXPECTED
same_decisions() { [ -n "$(decisions "$1")" ] && [ "$(decisions "$1")" = "$(decisions "$2")" ]; }
notes_match() { jq -r '.notes[]' "$1" | grep -q -- "$2"; }
outbox_at_least() { [ "$(ctl "$1" --json catalogue status | jq .outbox_depth)" -ge "$2" ]; }
lookups_are() { [ "$(ctl "$1" --json catalogue status | jq .lookups)" = "$2" ]; }
plain_status() { # catalogue status of a pimd without a catalogue key
	printf 'allow_root_jobs = yes\n' > "$T/plain.conf"
	"$PIMD" --foreground --socket "$T/plain.sock" --state-dir "$T/plain" --config "$T/plain.conf" 2>/dev/null &
	p=$!
	wait_ready "$T/plain.sock"
	"$PIMCTL" --socket "$T/plain.sock" catalogue status
	r=$?
	kill $p; wait $p
	return $r
}

# ------------------------------------------------------------ configuration
printf 'catalogue = postgresql://u:secret@db.example/pim\n' > "$T/pw.conf"
expect_rc 1 "must not carry a password" "a password in the catalogue key is refused" \
	"$PIMD" --check-config --config "$T/pw.conf"
printf 'catalogue = host=db.example password=secret\n' > "$T/pw2.conf"
expect_rc 1 "must not carry a password" "a password in keyword form is refused" \
	"$PIMD" --check-config --config "$T/pw2.conf"
printf 'catalogue = postgresql://db.example/pim?sslmode=nonsense\n' > "$T/bad.conf"
printf 'catalogue = service=fleet sslmode=verify-full\ncatalogue_platform = lab-rack-3\n' > "$T/svc.conf"
expect_rc 0 "catalogue = service=fleet sslmode=verify-full" "a service name with sslmode is taken" \
	"$PIMD" --check-config --config "$T/svc.conf"

# ------------------------------------------------------------ A profiles and publishes
start_pimd a host-a && ok "pimd A starts with a catalogue" || bad "pimd A starts with a catalogue"
check "A: catalogue status says reachable" wait_reachable a
check "A: its catalogue thread runs at pimd's nice value ($(nice)), the loop 5 below or the log says why not" sh -c "
	t=\$(grep -lx pimd-catalogue /proc/$PID_a/task/*/comm | head -n 1); [ -n \"\$t\" ] || exit 1
	c=\$(awk '{print \$19}' \${t%/comm}/stat); l=\$(awk '{print \$19}' /proc/$PID_a/stat); echo \"catalogue \$c, loop \$l\"
	[ \$c -eq $(nice) ] && { [ \$l -eq $(( $(nice) - 5 )) ] || grep -q 'The event loop and the writer thread run at' '$T/a.log'; }"
expect_rc 0 "Loaded model three-regions" "A: load a model" ctl a model load "$MJ/three_regions.json"
expect_rc 0 "done" "A: profile it" ctl a profile three-regions --library "$M/three_regions.so" --reps 3
check "A publishes the run (outbox drained)" wait_published a 1
KEY_A=$(ctl a --json catalogue status | jq -r .platform_key)
check "the catalogue has A's run with its 5 regions under A's platform key" psql_is \
	"SELECT r.regions || ' ' || r.kind || ' ' || r.platform_key FROM pim_catalogue.runs r WHERE host_id = 'host-a'" \
	"5 measured $KEY_A"
check "the catalogue's schema is at the newest migration" psql_is \
	"SELECT max(version) FROM pim_catalogue.schema_migrations" "$(ls sql/catalogue/[0-9]*.sql | wc -l)"
ctl a --json placement three-regions > "$T/a.json" 2>&1

# ------------------------------------------------------------ B answers without profiling
start_pimd b host-b && ok "pimd B starts" || bad "pimd B starts"
# the same manifest under another name: the identity is its content hash
sed 's/"three-regions"/"three-on-b"/' "$MJ/three_regions.json" > "$T/three-on-b.json"
expect_rc 0 "Loaded model three-on-b" "B: load the same manifest under another name" ctl b model load "$T/three-on-b.json"
ctl b --json placement three-on-b > "$T/b.json" 2>&1
check "B answers from the catalogue: 5 regions measured by host-a, fetched now" json_is "$T/b.json" \
	'.catalogue.host == "host-a" and .catalogue.fetched and .catalogue.regions == 5 and .regions_with_metrics == 5'
check "B's decisions equal A's" same_decisions "$T/a.json" "$T/b.json"
check "B's notes name the host, the date and the backend" notes_match "$T/b.json" \
	'fleet catalogue, measured on host host-a on 20[0-9-]* [0-9:]* UTC with the [a-z]* backend'
expect_rc 0 "Metrics of 5 regions from the fleet catalogue: host host-a" "B: pimctl placement says where the metrics come from" \
	ctl b placement three-on-b
expect_rc 1 "no profile job 1" "B never profiled (no run in its store)" ctl b profile --status 1
ctl b --json placement three-on-b --cores 64,128 > "$T/b2.json" 2>&1
check "the next answer is local (fetched false)" json_is "$T/b2.json" '.catalogue.fetched == false and .catalogue.host == "host-a"'
check "B asked the catalogue once in all" lookups_are b 1
ctl b placement three-on-b --svg "$T/b.svg" >/dev/null 2>&1
check "B's SVG picture says where the metrics come from" grep -q "fleet catalogue, measured on host host-a" "$T/b.svg"
# B's first answer was computed from the rows it fetched (in memory, while they were stored):
# the same query answered again is the answer stored with them, and once more computed from its
# local store (stored answers dropped) it says the same
ctl b --json placement three-on-b > "$T/b3.json" 2>&1
check "B's identical query is the answer stored with the fetched rows, saying they are kept" json_is "$T/b3.json" \
	'.cached and .catalogue.fetched == false and ([.notes[] | select(test("fetched for this answer"))] | length == 0) and ([.notes[] | select(test("catalogue.*kept in the local store"))] | length == 1)'
sqlite3 "$T/b/pimd.db" "DELETE FROM decisions"
ctl b --json placement three-on-b > "$T/b4.json" 2>&1
check "B's answer computed from its local store is not a stored one" json_is "$T/b4.json" \
	'(.cached | not) and .catalogue.fetched == false and .catalogue.host == "host-a"'
check "B's first answer (fetched rows) and its answer from the local store are identical" \
	sh -c "[ \"\$(jq -S 'del(.cached, .catalogue.fetched, .notes)' '$T/b.json')\" = \"\$(jq -S 'del(.cached, .catalogue.fetched, .notes)' '$T/b4.json')\" ]"
check "B's notes: only the first says fetched for this answer" sh -c \
	"jq -r '.notes[]' '$T/b.json' | grep -q 'fetched for this answer, being stored in the local store' &&
	 jq -r '.notes[]' '$T/b4.json' | grep -q 'regions use metrics from the fleet catalogue.*(kept in the local store'"
check "B still asked the catalogue once in all" lookups_are b 1
grep -q "5 regions taken from the fleet catalogue (fetched in .* ms, answered from them at .* ms, stored at .* ms)" \
	"$T/b.log" && ok "B's log: the rows were stored while the answer was computed" ||
	bad "B's log: the rows were stored while the answer was computed"
# after a restart, B answers the model from its own store without the catalogue (unreachable now)
kill "$PID_b" && wait "$PID_b"
URI_SAVED=$URI
URI="postgresql://$PGUSER@127.0.0.1:1/$PGDATABASE"
start_pimd b host-b && ok "pimd B restarts, its catalogue unreachable" || bad "pimd B restarts, its catalogue unreachable"
ctl b --json placement three-on-b --param sigma=0.41 > "$T/b5.json" 2>&1
check "B after its restart: the catalogue's metrics from its own store, nothing asked" json_is "$T/b5.json" \
	'(.cached | not) and .catalogue.host == "host-a" and .catalogue.fetched == false and .regions_with_metrics == 5 and ([.notes[] | select(test("did not answer"))] | length == 0)'
check "B after its restart asked the catalogue nothing" lookups_are b 0
kill "$PID_b" && wait "$PID_b"
URI=$URI_SAVED
start_pimd b host-b && ok "pimd B restarts with its catalogue" || bad "pimd B restarts with its catalogue"

# ------------------------------------------------------------ fetched rows that cannot be stored
# G's store is locked by another process while G's first answer fetches: the answer comes from
# the rows in memory, the storer cannot store them and says so, and the next answer asks again
start_pimd g host-g "busy_timeout_ms = 300" && ok "pimd G starts" || bad "pimd G starts"
ctl g model load "$T/three-on-b.json" >/dev/null 2>&1
(echo "BEGIN IMMEDIATE;"; sleep 2; echo "COMMIT;") | sqlite3 "$T/g/pimd.db" &
LOCK=$!
sleep 0.3
ctl g --json placement three-on-b > "$T/g.json" 2>&1
check "G answers from the fetched rows while its store is locked" json_is "$T/g.json" \
	'.catalogue.fetched and .catalogue.host == "host-a" and .regions_with_metrics == 5'
check "G's answer says the rows are being stored, and decides as B" sh -c \
	"jq -r '.notes[]' '$T/g.json' | grep -q 'fetched for this answer, being stored in the local store' &&
	 [ \"\$(jq -c '[.estimates[0].regions[] | {id: .region_id, pim: .pim}]' '$T/g.json')\" = \"\$(jq -c '[.estimates[0].regions[] | {id: .region_id, pim: .pim}]' '$T/b.json')\" ]"
wait $LOCK
check "G's log says the fetched rows were not stored" grep -q "fetched for an answer were not stored" "$T/g.log"
ctl g --json placement three-on-b > "$T/g2.json" 2>&1
check "G's next answer asks the catalogue again (nothing was stored)" json_is "$T/g2.json" '.catalogue.fetched and (.cached | not)'
check "G asked the catalogue twice" lookups_are g 2
ctl g --json placement three-on-b --cores 64,128 > "$T/g3.json" 2>&1
check "G answers locally once the rows are stored" json_is "$T/g3.json" '.catalogue.fetched == false and .regions_with_metrics == 5'
check "G asked the catalogue twice in all" lookups_are g 2

# ------------------------------------------------------------ another platform never matches
start_pimd c host-c "catalogue_platform = another-kind-of-host" && ok "pimd C starts with another platform key" ||
	bad "pimd C starts with another platform key"
ctl c model load "$MJ/three_regions.json" >/dev/null 2>&1
ctl c --json placement three-regions > "$T/c.json" 2>&1
check "C (another platform key) gets no metrics" json_is "$T/c.json" '(has("catalogue") | not) and .regions_with_metrics == 0'
check "C's answer says the catalogue has none on its platform" notes_match "$T/c.json" \
	"has no metrics of this model.*another-kind-of-host"

# ------------------------------------------------------------ PostgreSQL down while A publishes
pg_ctlcluster "$PGVER" "$PGCL" stop -m immediate
expect_rc 0 "done" "A: profile while the catalogue is down" ctl a profile three-regions --library "$M/three_regions.so" --reps 3
sleep 1
expect_rc 1 "UNREACHABLE" "A: catalogue status says unreachable" ctl a catalogue status
check "A's outbox holds the run" outbox_at_least a 1
expect_rc 0 "Placement of three-regions" "A answers placements from its own store meanwhile" ctl a placement three-regions
# a third run, whose publishing a second immediate stop may cut short
pg_ctlcluster "$PGVER" "$PGCL" start
ctl a profile three-regions --library "$M/three_regions.so" --reps 3 >/dev/null 2>&1 &
PROF=$!
sleep 0.3
pg_ctlcluster "$PGVER" "$PGCL" stop -m immediate
wait $PROF
pg_ctlcluster "$PGVER" "$PGCL" start
check "A's outbox drains once PostgreSQL is back" wait_published a 3
check "every run of A is in the catalogue once, with all its regions (3 runs, 15 rows)" psql_is \
	"SELECT count(*) || ' ' || sum(regions) || ' ' || (SELECT count(*) FROM pim_catalogue.region_metrics m JOIN pim_catalogue.runs r ON r.id = m.run_id WHERE r.host_id = 'host-a') FROM pim_catalogue.runs WHERE host_id = 'host-a'" \
	"3 15 15"

# ------------------------------------------------------------ imported counts
N_A=$(( $(ctl a --json catalogue status | jq '.published + .conflicts') + 1 ))
expect_rc 0 "region 1" "A: import perf counts for region 1" \
	ctl a import-perf three-regions 1 "$D/qkv-matvec.csv" --executions 100
check "A publishes the import" wait_published a "$N_A"
check "the import is in the catalogue labelled imported, with the uid" psql_is \
	"SELECT kind || ' ' || backend || ' ' || uid FROM pim_catalogue.runs WHERE host_id = 'host-a' AND kind = 'imported'" \
	"imported imported $(id -u)"
# B, with the manifest under a third name it has no metrics of, asks again
sed 's/"three-regions"/"three-again"/' "$MJ/three_regions.json" > "$T/three-again.json"
ctl b model load "$T/three-again.json" >/dev/null 2>&1
ctl b placement three-again >/dev/null 2>&1
ctl b --json model show three-again > "$T/d.json" 2>&1
check "B takes a measurement of region 1, not the newer imported counts" json_is "$T/d.json" \
	'([.metrics[] | select(.region_id == 1)][0].evidence != "imported") and (.metrics | length) == 5'

# Work threads answer at once: first answers of three unmeasured models asked together are all
# computed from the catalogue, their rows stored one storing at a time, and shown once stored.
for cm in c1 c2 c3; do
	sed "s/\"three-regions\"/\"three-$cm\"/" "$MJ/three_regions.json" > "$T/three-$cm.json"
	ctl b model load "$T/three-$cm.json" >/dev/null 2>&1
done
ctl b placement three-c1 > "$T/c1.out" 2>&1 & P1=$!
ctl b placement three-c2 > "$T/c2.out" 2>&1 & P2=$!
ctl b placement three-c3 > "$T/c3.out" 2>&1 & P3=$!
wait $P1 && wait $P2 && wait $P3 && ok "three first answers asked together are answered" \
	|| bad "three first answers asked together are answered"
for cm in c1 c2 c3; do
	ctl b --json model show three-$cm > "$T/$cm.json" 2>&1
	check "three-$cm's metrics, fetched together with others, are all shown" json_is "$T/$cm.json" '(.metrics | length) == 5'
done

# ------------------------------------------------------------ wrong credentials, no catalogue
start_pimd e host-e "" "$T/pgpass-wrong" && ok "pimd E starts with a wrong password" || bad "pimd E starts with a wrong password"
ctl e model load "$MJ/three_regions.json" >/dev/null 2>&1
sleep 1
expect_rc 1 "password authentication failed" "E: catalogue status names the failed authentication" ctl e catalogue status
expect_rc 0 "Placement of three-regions" "E answers from its own store" ctl e placement three-regions
ctl e --json placement three-regions > "$T/e.json" 2>&1
check "E's answer says the catalogue did not answer" notes_match "$T/e.json" "fleet catalogue was not asked or did not answer"
URI="postgresql://$PGUSER@127.0.0.1:1/$PGDATABASE"
start_pimd f host-f && ok "pimd F starts with an unreachable catalogue" || bad "pimd F starts with an unreachable catalogue"
ctl f model load "$MJ/three_regions.json" >/dev/null 2>&1
sleep 1
expect_rc 1 "UNREACHABLE" "F: catalogue status says unreachable" ctl f catalogue status
expect_rc 1 "onnection refused" "F: and why" ctl f catalogue status
expect_rc 0 "rests on this host's store alone" \
	"F answers a placement from its own store, saying the catalogue did not answer" ctl f placement three-regions
expect_rc 1 "No fleet catalogue" "catalogue status without a catalogue" plain_status

# ------------------------------------------------------------ the fleet's view
ctl a --json catalogue list > "$T/list.json" 2>&1
check "catalogue list: the model on A's platform, from one host: 3 runs, 1 import" json_is "$T/list.json" \
	'[.entries[] | select(.this_platform)] | length == 1 and .[0].hosts == 1 and .[0].runs == 3 and .[0].imports == 1 and .[0].regions == 5'
expect_rc 0 "three-regions" "catalogue list as a table" ctl a catalogue list

# A model the fleet knows only from imported counts: a lookup with no measured run
sed 's/"three-regions"/"imports-only"/; s/"n_par": 1, "n_total": 262144/"n_par": 1, "n_total": 262143/' \
	"$MJ/three_regions.json" > "$T/imports-only.json"
ctl a model load "$T/imports-only.json" >/dev/null 2>&1
N_A=$(( $(ctl a --json catalogue status | jq '.published + .conflicts') + 1 ))
expect_rc 0 "region 1" "A: import perf counts for region 1 of a model it never measured" \
	ctl a import-perf imports-only 1 "$D/qkv-matvec.csv" --executions 100
check "A publishes that import" wait_published a "$N_A"
ctl b model load "$T/imports-only.json" >/dev/null 2>&1
ctl b placement imports-only >/dev/null 2>&1
ctl b --json model show imports-only > "$T/io.json" 2>&1
check "B takes the imported counts of region 1, labelled with their origin, and nothing else" json_is "$T/io.json" \
	'(.metrics | length) == 1 and .metrics[0].region == 1 and .metrics[0].evidence == "imported" and .metrics[0].source == "fleet catalogue: host host-a, imported backend"'

echo
echo "fleet: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
