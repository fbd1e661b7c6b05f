#!/bin/sh
# make bench-fleet: the fleet catalogue at scale, under pg_virtualenv.
# Usage: pg_virtualenv -t sh bench/bench_fleet.sh BUILD_DIR [HOSTS] [REGIONS] [ROUNDS]
# Environment: FLEET_ROUNDS=N for ROUNDS (make bench-fleet passes three arguments);
# FLEET_BASELINE=BUILD_DIR of another build, measured side by side with BUILD_DIR (the two
# alternate in each round, on the one catalogue); KEEP_LOG=FILE keeps the pimd logs.
#
# 1. A model of REGIONS regions is loaded into a real pimd (host "new-host"), which has never
#    measured it: its first placement finds nothing in the catalogue (and computes the model's
#    content hash, read back from its store).
# 2. fleet-hosts publishes one run of that model for each of HOSTS simulated hosts (distinct
#    host ids, pimd's own publishing statements, 4 connections), then times lookups and round
#    trips: publishes/s, lookup p50/p99, the catalogue's bytes per run.
# 3. ROUNDS times (default 1), for each build: a new host (a pimd with a new state directory)
#    loads the model and computes its content hash while its catalogue is unreachable, then is
#    started again with the catalogue (and opens its connection for lookups with a list); its
#    first answer (lookup, the metrics stored, the placement computed) is timed beside a local answer of the same model (other parameters,
#    so not a stored answer; the median of 3) plus one round trip to PostgreSQL.
set -eu
KEEP_LOG=${KEEP_LOG:-}
B=$(cd "${1:-build}" && pwd)
HOSTS=${2:-1000}
REGIONS=${3:-10000}
ROUNDS=${4:-${FLEET_ROUNDS:-1}}
BASE=${FLEET_BASELINE:-}
[ -n "$BASE" ] && BASE=$(cd "$BASE" && pwd)
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench-fleet: ROUNDS must be a number from 1" >&2; exit 2 ;; esac
T=$(mktemp -d /tmp/pimd-bench-fleet.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$KEEP_LOG" ] && cat "$T"/log.* > "$KEEP_LOG"; rm -rf "$T"' EXIT

python3 - "$REGIONS" > "$T/model.json" <<'PY'
import json, sys
n = int(sys.argv[1])
allocs = [{"id": a, "bytes": 1 << 20, "kind": "argument", "name": "a%d" % a} for a in range(64)]
regions = [{"id": i, "name": "r%d" % i, "op": "op%d" % (i % 20), "order": i, "n_par": 262144,
            "n_total": 262144, "operands": [{"allocation": i % 64, "bytes": 1 << 20, "role": "in"},
                                            {"allocation": (i + 1) % 64, "bytes": 1 << 20, "role": "out"}]}
           for i in range(n)]
json.dump({"name": "fleet-bench", "source": "bench/bench_fleet.sh", "allocations": allocs, "regions": regions},
          sys.stdout)
PY
printf '*:*:*:%s:%s\n' "$PGUSER" "$PGPASSWORD" > "$T/pgpass"
chmod 600 "$T/pgpass"

# start BUILD NAME CATALOGUE: pimd of BUILD as host NAME (state $T/NAME), its catalogue at CATALOGUE
start() {
	printf 'catalogue = %s\ncatalogue_host_id = %s\ncatalogue_platform = bench-platform\nb_cpu = 10e9\ncatalogue_timeout_ms = 60000\n' \
		"$3" "$2" > "$T/$2.conf"
	env -u PGPASSWORD PGPASSFILE="$T/pgpass" "$1/pimd" --foreground --socket "$T/$2.sock" --state-dir "$T/$2" \
		--config "$T/$2.conf" 2>>"$T/log.$2" &
	PID=$!
	i=0
	while ! "$1/pimctl" --socket "$T/$2.sock" status >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
stop() { kill "$PID" && wait "$PID" || true; PID=; }
CAT="postgresql://$PGUSER@$PGHOST:$PGPORT/$PGDATABASE"
NOCAT="postgresql://$PGUSER@127.0.0.1:1/$PGDATABASE"

start "$B" new-host "$CAT"
"$B/pimctl" --socket "$T/new-host.sock" model load "$T/model.json"
"$B/pimctl" --socket "$T/new-host.sock" placement fleet-bench --summary >/dev/null
HASH=$(sqlite3 "$T/new-host/pimd.db" "SELECT content_hash FROM models WHERE name = 'fleet-bench'")
stop
echo "model fleet-bench: $REGIONS regions, content hash $HASH"

"$B/bench/fleet-hosts" --hash "$HASH" --platform bench-platform --hosts "$HOSTS" --regions "$REGIONS" \
	--threads 4 --lookups 100 | tee "$T/hosts.out"
RTT=$(sed -n 's/^round_trip_ms=//p' "$T/hosts.out")
BYTES=$(sed -n 's/^bytes_per_run=//p' "$T/hosts.out")
awk -v b="$BYTES" -v n="$REGIONS" 'BEGIN {
	printf "catalogue size: %.1f MiB per run, %.0f bytes per region row\n", b / 1048576, b / n }'

ms() { # ms COMMAND...: wall milliseconds of the command
	s=$(date +%s%N)
	"$@" >/dev/null
	echo $(( ($(date +%s%N) - s) / 1000000 ))
}
# first BUILD LABEL ROUND: a new host of BUILD, its first answer and a local answer
first() {
	h="$2-$3"
	start "$1" "$h" "$NOCAT" # the model and its content hash, the catalogue not asked
	"$1/pimctl" --socket "$T/$h.sock" model load "$T/model.json" >/dev/null
	"$1/pimctl" --socket "$T/$h.sock" placement fleet-bench --summary >/dev/null
	stop
	start "$1" "$h" "$CAT"
	S="$T/$h.sock"
	# the lookups' connection open, as on a host that has asked before (a list opens it)
	"$1/pimctl" --socket "$S" catalogue list >/dev/null
	FIRST=$(ms "$1/pimctl" --socket "$S" placement fleet-bench --summary)
	"$1/pimctl" --socket "$S" --json placement fleet-bench --summary > "$T/first.json"
	jq -e '.catalogue.regions == '"$REGIONS" "$T/first.json" >/dev/null ||
		{ echo "bench-fleet: $h's answer did not come from the catalogue"; exit 1; }
	L1=$(ms "$1/pimctl" --socket "$S" placement fleet-bench --summary --param sigma=0.41)
	L2=$(ms "$1/pimctl" --socket "$S" placement fleet-bench --summary --param sigma=0.42)
	L3=$(ms "$1/pimctl" --socket "$S" placement fleet-bench --summary --param sigma=0.43)
	stop
	LOCAL=$(printf '%s\n%s\n%s\n' "$L1" "$L2" "$L3" | sort -n | sed -n 2p)
	LOOK=$(sed -n 's/.*regions taken from the fleet catalogue \(.*\)/\1/p' "$T/log.$h" | tail -1)
	awk -v w="$2" -v k="$3" -v f="$FIRST" -v l="$LOCAL" -v r="$RTT" -v look="$LOOK" 'BEGIN {
		printf "%-8s round %s: first answer %d ms, local answer %d ms (median of 3), ratio %.2f (bar <= 2: %s); pimd: %s\n",
			w, k, f, l, f / (l + r), f <= 2 * (l + r) ? "met" : "NOT met", look }' | tee -a "$T/rounds"
}
echo "round trip to PostgreSQL: $RTT ms"
k=1
while [ "$k" -le "$ROUNDS" ]; do
	first "$B" this "$k"
	[ -z "$BASE" ] || first "$BASE" baseline "$k"
	k=$((k + 1))
done
awk '{ n[$1]++; r = $0; sub(/.*ratio /, "", r); sub(/ .*/, "", r); s[$1] = s[$1] " " r; if (r + 0 <= 2) m[$1]++ }
	END { for (w in n) printf "%s: ratios%s; bar met in %d of %d rounds\n", w, s[w], m[w] + 0, n[w] }' "$T/rounds"
