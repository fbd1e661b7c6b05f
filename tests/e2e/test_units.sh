#!/bin/sh
# test_units.sh - static checks of pimd's systemd units (no installation, no start)
#
# usage: tests/e2e/test_units.sh BUILD_UNIT_DIR
#
# BUILD_UNIT_DIR holds pimd.service (already @sbindir@-substituted, so that
# ExecStart= names an executable that exists) and pimd.socket. pimd.sysusers
# and pimd.tmpfiles are taken from BUILD_UNIT_DIR when present there, else from
# the source tree (systemd/ next to tests/).
#
# Checks:
#  1. no unsubstituted @...@ placeholder is left in the units;
#  2. `systemd-analyze verify` of both units is clean. It runs on a private
#     copy of the two files (so no other unit in BUILD_UNIT_DIR is picked up)
#     with --man=no (pimd(8) need not be installed for man: links) and
#     --recursive-errors=no (only our two units decide the exit status).
#     Any output line naming pimd.service, pimd.socket or the copy's directory
#     is a failure; other lines (about the host's own units) are shown as notes.
#     systemd 252 does not resolve User=/Group=, so the users pimd/pim need not
#     exist on the host;
#  3. `systemd-analyze security --offline=true` of pimd.service: the
#     "Overall exposure level" must be <= 2.5 (also enforced with
#     --threshold=25, the same limit on systemd's 0..100 scale); prints
#     "units: exposure X.Y (limit 2.5)";
#  4. settings the daemon cannot work without are still there (a lower
#     exposure bought by removing them is a regression): notify + watchdog,
#     the four capabilities, perf_event_open in the syscall filter, no
#     PrivateUsers=yes, no ProcSubset=pid, the socket path/mode/group, and
#     TasksMax=/MemoryMax= set, TasksMax= with room for one profiling job,
#     Delegate= with the pids and memory controllers and the service's own
#     cgroup writable (ReadWritePaths=, or ProtectControlGroups=no);
#  5. the sysusers.d and tmpfiles.d snippets apply cleanly to an empty
#     scratch root (systemd-sysusers/-tmpfiles --root=TMP; the host is not
#     touched).
#
# Exit status: 0 pass, 1 fail, 77 skip (systemd-analyze not installed).

set -u

LIMIT=2.5
LIMIT_SCALED=25   # --threshold uses systemd's internal 0..100 scale

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_UNIT_DIR" >&2
    exit 1
fi
UNIT_DIR=$1

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze not found (install systemd to check the units)"
    exit 77
fi
SRC_DIR=$(cd "$(dirname "$0")/../../systemd" 2>/dev/null && pwd) || SRC_DIR=

# Stable, parseable output: no pager, no colours, no emoji-dependent parsing.
SYSTEMD_PAGER='cat'; SYSTEMD_COLORS=0; SYSTEMD_LOG_COLOR=0
export SYSTEMD_PAGER SYSTEMD_COLORS SYSTEMD_LOG_COLOR

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok()   { echo "ok:   $*"; }

for f in pimd.service pimd.socket; do
    if [ ! -f "$UNIT_DIR/$f" ]; then
        echo "FAIL: $UNIT_DIR/$f missing"
        exit 1
    fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pimd-units.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
mkdir "$TMP/units" "$TMP/root"
cp "$UNIT_DIR/pimd.service" "$UNIT_DIR/pimd.socket" "$TMP/units/"
SVC=$TMP/units/pimd.service
SOCK=$TMP/units/pimd.socket

# --- 1. placeholders ----------------------------------------------------------
if grep -n '@[A-Za-z_]*@' "$SVC" "$SOCK" >"$TMP/ph" 2>&1; then
    fail "unsubstituted placeholders:"; sed 's/^/      /' "$TMP/ph"
else
    ok "no @placeholders@ left"
fi
exe=$(sed -n 's/^ExecStart=[-@:+!]*\([^ ]*\).*/\1/p' "$SVC" | head -n 1)
if [ -n "$exe" ] && [ -x "$exe" ]; then
    ok "ExecStart executable: $exe"
else
    fail "ExecStart executable '$exe' missing or not executable"
fi

# --- 2. systemd-analyze verify ----------------------------------------------
systemd-analyze verify --man=no --recursive-errors=no "$SVC" "$SOCK" \
    >"$TMP/verify" 2>&1
vrc=$?
if grep -E "pimd\.(service|socket)|$TMP" "$TMP/verify" >"$TMP/verify.ours"; then
    fail "systemd-analyze verify reports on our units:"
    sed 's/^/      /' "$TMP/verify.ours"
elif [ $vrc -ne 0 ]; then
    fail "systemd-analyze verify exit status $vrc:"
    sed 's/^/      /' "$TMP/verify"
else
    ok "systemd-analyze verify clean"
    if [ -s "$TMP/verify" ]; then
        echo "note: verify output about other (host) units, ignored:"
        sed 's/^/      /' "$TMP/verify"
    fi
fi

# --- 3. exposure --------------------------------------------------------------
LC_ALL=C systemd-analyze security --offline=true --threshold=$LIMIT_SCALED \
    --no-pager "$SVC" >"$TMP/security" 2>&1
src=$?
line=$(grep 'Overall exposure level for pimd.service' "$TMP/security")
exposure=$(printf '%s\n' "$line" | sed -n 's/.*pimd\.service: *\([0-9][0-9.]*\).*/\1/p')
if [ -z "$exposure" ]; then
    fail "no exposure figure from systemd-analyze security (exit $src):"
    sed 's/^/      /' "$TMP/security"
else
    echo "units: exposure $exposure (limit $LIMIT)"
    echo "      $line"
    if awk -v e="$exposure" -v l="$LIMIT" 'BEGIN { exit !(e + 0 <= l + 0) }' \
        && [ $src -eq 0 ]; then
        ok "exposure $exposure <= $LIMIT"
    else
        fail "exposure $exposure > $LIMIT (systemd-analyze exit $src); failing checks:"
        # LC_ALL=C: "+" marks a passed check, "-" a failed one
        grep '^- ' "$TMP/security" | sed 's/^/      /'
    fi
fi

# --- 4. settings the daemon needs -------------------------------------------
# value KEY FILE: all values of KEY (repeatable keys joined by spaces)
value() { sed -n "s/^[[:space:]]*$1=//p" "$2" | tr '\n' ' '; }
need() {  # need FILE KEY WORD...: every WORD among KEY's values
    file=$1; key=$2; shift 2
    v=" $(value "$key" "$file") "
    for w in "$@"; do
        case "$v" in
            *" $w "*) ;;
            *) fail "$(basename "$file"): $key= lacks '$w' (has:$v)"; return ;;
        esac
    done
    ok "$(basename "$file"): $key= has $*"
}
need "$SVC" Type notify
need "$SVC" CapabilityBoundingSet CAP_PERFMON CAP_SETUID CAP_SETGID CAP_KILL
need "$SVC" AmbientCapabilities CAP_PERFMON CAP_SETUID CAP_SETGID CAP_KILL
need "$SVC" SystemCallFilter @system-service perf_event_open
need "$SVC" RestrictAddressFamilies AF_UNIX
need "$SVC" StateDirectory pimd
need "$SVC" User pimd
if [ -z "$(value WatchdogSec "$SVC")" ]; then fail "WatchdogSec= not set"; else ok "WatchdogSec=$(value WatchdogSec "$SVC")"; fi
# Room for pimd's threads (at most 66) and one profiling job's processes (RLIMIT_NPROC 256).
tasks=$(value TasksMax "$SVC" | tr -d ' ')
case "$tasks" in
    ''|*[!0-9]*) fail "TasksMax= is not a number of tasks ('$tasks')" ;;
    *) if [ "$tasks" -ge $((66 + 256)) ]; then ok "TasksMax=$tasks"; else fail "TasksMax=$tasks < 322"; fi ;;
esac
if [ -z "$(value MemoryMax "$SVC")" ]; then fail "MemoryMax= not set"; else ok "MemoryMax=$(value MemoryMax "$SVC")"; fi
case " $(value PrivateUsers "$SVC") " in
    *" yes "*|*" true "*|*" 1 "*|*" on "*) fail "PrivateUsers= on: workers cannot switch to client uids" ;;
    *) ok "PrivateUsers off" ;;
esac
case " $(value ProcSubset "$SVC") " in
    *" pid "*) fail "ProcSubset=pid hides /proc/sys/kernel/perf_event_paranoid" ;;
    *) ok "/proc/sys stays visible" ;;
esac
# A cgroup per profiling job: the service's cgroup delegated with the pids and memory
# controllers, and writable for pimd inside the read-only cgroup file system.
case " $(value Delegate "$SVC") " in
    *" yes "*|*" true "*) ok "Delegate=yes" ;;
    *) need "$SVC" Delegate pids memory ;;
esac
case " $(value ProtectControlGroups "$SVC") " in
    *" no "*|*" false "*) ok "ProtectControlGroups=no: the delegated cgroup is writable" ;;
    *) need "$SVC" ReadWritePaths -/sys/fs/cgroup/system.slice/pimd.service ;;
esac
need "$SOCK" ListenStream /run/pimd/pimd.sock
need "$SOCK" SocketMode 0660
need "$SOCK" SocketGroup pim

# --- 5. sysusers.d / tmpfiles.d snippets on a scratch root -----------------
pick() { if [ -f "$UNIT_DIR/$1" ]; then echo "$UNIT_DIR/$1";
         elif [ -n "$SRC_DIR" ] && [ -f "$SRC_DIR/$1" ]; then echo "$SRC_DIR/$1"; fi; }
SYSUSERS=$(pick pimd.sysusers)
TMPFILES=$(pick pimd.tmpfiles)
if [ -z "$SYSUSERS" ] || [ -z "$TMPFILES" ]; then
    echo "note: pimd.sysusers/pimd.tmpfiles not found; snippet checks not run"
elif ! command -v systemd-sysusers >/dev/null 2>&1 \
    || ! command -v systemd-tmpfiles >/dev/null 2>&1; then
    echo "note: systemd-sysusers/systemd-tmpfiles missing; snippet checks not run"
else
    mkdir -p "$TMP/root/etc"
    if systemd-sysusers --root="$TMP/root" "$SYSUSERS" >"$TMP/su" 2>&1 \
        && grep -q '^pimd:' "$TMP/root/etc/passwd" \
        && grep -q '^pim:[^:]*:[^:]*:\(.*,\)\{0,1\}pimd\(,.*\)\{0,1\}$' "$TMP/root/etc/group"; then
        ok "sysusers: user pimd, group pim with member pimd"
    else
        fail "sysusers snippet $SYSUSERS:"; sed 's/^/      /' "$TMP/su"
    fi
    if systemd-tmpfiles --root="$TMP/root" --create "$TMPFILES" >"$TMP/tf" 2>&1 \
        && [ -d "$TMP/root/var/lib/pimd" ] && [ -d "$TMP/root/etc/pimd" ]; then
        ok "tmpfiles: /var/lib/pimd $(stat -c '%a' "$TMP/root/var/lib/pimd"), /etc/pimd $(stat -c '%a' "$TMP/root/etc/pimd")"
    else
        fail "tmpfiles snippet $TMPFILES:"; sed 's/^/      /' "$TMP/tf"
    fi
fi

# --- 6. the catalogue drop-in (systemd/pimd-catalogue.conf) -------------------
# pimd.service with the drop-in's [Service] section after its own (as systemd
# applies a drop-in): verify clean, TCP allowed only to what IPAddressAllow=
# names (IPAddressDeny=any stays), the credential and PGPASSFILE set, and the
# exposure within CATALOGUE_LIMIT.
CATALOGUE_LIMIT=3.0
DROPIN=${SRC_DIR:+$SRC_DIR/pimd-catalogue.conf}
if [ -n "$DROPIN" ] && [ -f "$DROPIN" ]; then
    mkdir -p "$TMP/cat"
    cat "$SVC" "$DROPIN" > "$TMP/cat/pimd.service"
    cp "$SOCK" "$TMP/cat/pimd.socket"
    systemd-analyze verify --man=no --recursive-errors=no "$TMP/cat/pimd.service" "$TMP/cat/pimd.socket" \
        >"$TMP/cat/verify" 2>&1
    if grep -E "pimd\.(service|socket)|$TMP" "$TMP/cat/verify" >"$TMP/cat/ours"; then
        fail "the catalogue drop-in: systemd-analyze verify reports:"; sed 's/^/      /' "$TMP/cat/ours"
    else
        ok "the catalogue drop-in: systemd-analyze verify clean"
    fi
    for want in 'IPAddressDeny=any' 'IPAddressAllow=localhost' 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' \
        'LoadCredential=pgpass:' 'Environment=PGPASSFILE=%d/pgpass'; do
        grep -q "^$want" "$TMP/cat/pimd.service" || fail "the catalogue drop-in: $want missing"
    done
    LC_ALL=C systemd-analyze security --offline=true --no-pager "$TMP/cat/pimd.service" >"$TMP/cat/sec" 2>&1
    cexp=$(sed -n 's/.*Overall exposure level for pimd\.service: *\([0-9.]*\).*/\1/p' "$TMP/cat/sec")
    if [ -n "$cexp" ] && awk -v e="$cexp" -v l="$CATALOGUE_LIMIT" 'BEGIN { exit !(e <= l) }'; then
        ok "the catalogue drop-in: exposure $cexp (limit $CATALOGUE_LIMIT)"
    else
        fail "the catalogue drop-in: exposure '${cexp:-?}' above $CATALOGUE_LIMIT"
    fi
fi

if [ $fails -ne 0 ]; then
    echo "units: FAIL ($fails)"
    exit 1
fi
echo "units: PASS"
exit 0
