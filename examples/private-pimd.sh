# private-pimd.sh: sourced by the scripts that run a pimd of their own (the decoder demo, the
# extraction benchmark, the PyTorch end-to-end test).
#
#   private_pimd_start BUILD_DIR DIR   starts BUILD_DIR/pimd in the foreground on DIR/pimd.sock,
#                                      its database in DIR/state, its log in DIR/pimd.log (run
#                                      as root, it may run models as root: allow_root_jobs;
#                                      the lines of $PRIVATE_PIMD_CONF, if set, are added to
#                                      its pimd.conf);
#                                      waits until it answers; sets PIMD_PID and exports
#                                      PIMD_SOCKET for pimctl.  Returns 1 (the log on standard
#                                      error) if it does not answer within 20 s.
#   private_pimd_stop                  stops it (SIGTERM) and waits for it.
#   private_tmpdir NAME                sets T to a fresh directory under $TMPDIR (then exported
#                                      as TMPDIR) that is removed, the pimd stopped, when the
#                                      script exits or is interrupted.

private_pimd_start() {
	: > "$2/pimd.conf"
	[ "$(id -u)" = 0 ] && echo "allow_root_jobs = yes" > "$2/pimd.conf"
	[ -z "${PRIVATE_PIMD_CONF:-}" ] || printf '%s\n' "$PRIVATE_PIMD_CONF" >> "$2/pimd.conf"
	"$1/pimd" --foreground --socket "$2/pimd.sock" --state-dir "$2/state" --config "$2/pimd.conf" \
		--log-level warning > "$2/pimd.log" 2>&1 &
	PIMD_PID=$!
	PIMD_SOCKET=$2/pimd.sock
	export PIMD_SOCKET
	_private_pimd_i=0
	until "$1/pimctl" status > /dev/null 2>&1; do
		_private_pimd_i=$((_private_pimd_i + 1))
		if [ "$_private_pimd_i" -ge 400 ]; then
			echo "pimd did not start:" >&2
			cat "$2/pimd.log" >&2
			return 1
		fi
		sleep 0.05
	done
}

private_pimd_stop() {
	if [ -n "${PIMD_PID:-}" ]; then
		kill "$PIMD_PID" 2>/dev/null
		wait "$PIMD_PID" 2>/dev/null
	fi
	PIMD_PID=
}

private_tmpdir() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	trap 'private_pimd_stop; rm -rf "$T"' EXIT
	trap 'exit 1' INT TERM
	TMPDIR=$T
	export TMPDIR
}
