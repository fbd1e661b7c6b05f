#!/bin/sh
# make bench-fleet: the fleet catalogue at scale, under pg_virtualenv.
# Usage: pg_virtualenv -t sh bench/bench_fleet.sh BUILD_DIR [HOSTS] [REGIONS]
#
# 1. A model of REGIONS regions is loaded into a real pimd (host "new-host"), which has never
#    measured it: its first placement finds nothing in the catalogue (and computes the model's
#    content hash, read back from its store).
# 2. fleet-hosts publishes one run of that model for each of HOSTS simulated hosts (distinct
#    host ids, pimd's own publishing statements, 4 connections), then times lookups and round
#    trips: publishes/s, lookup p50/p99, the catalogue's bytes per run.
# 3. The first answer of new-host, now from the catalogue (lookup, the metrics stored, the
#    placement computed), beside a local answer of the same model (other parameters, so not a
#    stored answer) plus one round trip to PostgreSQL.
set -eu
KEEP_LOG=${KEEP_LOG:-} # a file to keep pimd's log in
B=$(cd "${1:-build}" && pwd)
HOSTS=${2:-1000}
REGIONS=${3:-10000}
T=$(mktemp -d /tmp/pimd-bench-fleet.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$KEEP_LOG" ] && cp "$T/log" "$KEEP_LOG"; rm -rf "$T"' EXIT

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
printf 'catalogue = postgresql://%s@%s:%s/%s\ncatalogue_host_id = new-host\ncatalogue_platform = bench-platform\nb_cpu = 10e9\ncatalogue_timeout_ms = 60000\n' \
	"$PGUSER" "$PGHOST" "$PGPORT" "$PGDATABASE" > "$T/pimd.conf"
env -u PGPASSWORD PGPASSFILE="$T/pgpass" "$B/pimd" --foreground --socket "$T/s" --state-dir "$T/state" \
	--config "$T/pimd.conf" 2>"$T/log" &
PID=$!
i=0
while ! "$B/pimctl" --socket "$T/s" status >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
"$B/pimctl" --socket "$T/s" model load "$T/model.json"
"$B/pimctl" --socket "$T/s" placement fleet-bench --summary >/dev/null
HASH=$(sqlite3 "$T/state/pimd.db" "SELECT content_hash FROM models WHERE name = 'fleet-bench'")
echo "model fleet-bench: $REGIONS regions, content hash $HASH"

"$B/bench/fleet-hosts" --hash "$HASH" --platform bench-platform --hosts "$HOSTS" --regions "$REGIONS" \
	--threads 4 --lookups 100 | tee "$T/hosts.out"

ms() { # ms COMMAND...: wall milliseconds of the command
	s=$(date +%s%N)
	"$@" >/dev/null
	echo $(( ($(date +%s%N) - s) / 1000000 ))
}
FIRST=$(ms "$B/pimctl" --socket "$T/s" placement fleet-bench --summary)
"$B/pimctl" --socket "$T/s" --json placement fleet-bench --summary > "$T/first.json"
jq -e '.catalogue.regions == '"$REGIONS" "$T/first.json" >/dev/null ||
	{ echo "bench-fleet: new-host's answer did not come from the catalogue"; exit 1; }
L1=$(ms "$B/pimctl" --socket "$T/s" placement fleet-bench --summary --param sigma=0.41)
L2=$(ms "$B/pimctl" --socket "$T/s" placement fleet-bench --summary --param sigma=0.42)
L3=$(ms "$B/pimctl" --socket "$T/s" placement fleet-bench --summary --param sigma=0.43)
LOCAL=$(printf '%s\n%s\n%s\n' "$L1" "$L2" "$L3" | sort -n | sed -n 2p)
RTT=$(sed -n 's/^round_trip_ms=//p' "$T/hosts.out")
BYTES=$(sed -n 's/^bytes_per_run=//p' "$T/hosts.out")
echo "first answer on new-host (from the catalogue): $FIRST ms"
echo "local answer (median of 3, not stored before): $LOCAL ms; round trip to PostgreSQL: $RTT ms"
awk -v f="$FIRST" -v l="$LOCAL" -v r="$RTT" -v b="$BYTES" -v n="$REGIONS" 'BEGIN {
	printf "first / (local + round trip) = %.2f (target <= 2)\n", f / (l + r)
	printf "catalogue size: %.1f MiB per run, %.0f bytes per region row\n", b / 1048576, b / n
	printf "target (first <= 2 x (local + round trip)): %s\n", f <= 2 * (l + r) ? "met" : "NOT met" }'
