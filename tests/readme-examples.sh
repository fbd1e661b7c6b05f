#!/bin/sh
# readme-examples.sh BUILD_DIR [README]: runs the commands of README.md (make check-readme).
#
# Every fenced block whose info string is "sh" is run, in order, in one "sh -e", as a reader
# following the README types them: a variable one block exports, or the pimd one block starts,
# is there for the next.  Left out:
#   - a block right after the comment line "<!-- needs: systemd -->" (installing the units,
#     enabling them, writing /etc: make check-units and make check-install test those);
#   - a block made only of "make demo" / "make check" lines: make check runs this script
#     itself, and the demo runs the same commands as the tour (make demo);
#   - blocks in other languages (c) or without an info string (output, not commands).
# The blocks run in a scratch directory that mirrors the checkout by symbolic links (make and
# examples/... work there; what the commands write stays out of the checkout; "build" is
# BUILD_DIR), with HOME in it (so the tour's pimd, socket and database are private) and
# python3 the Debian one ($PYTHON, default /usr/bin/python3: python3-torch).  A pimd the
# blocks started as $PIMD_PID (the tour's) is stopped when they end, however they end.
# The first command that fails fails the check: its block's line in README is named and the
# end of the blocks' output shown.  README_EXAMPLES_TIMEOUT (default 900 s) bounds the run.
#
# readme-examples.sh --self-test: checks the extraction on small READMEs of its own (a failing
# command fails; a marked block, the make-check block and a c block are left out).
set -u

# extract README OUT: writes the runnable blocks of README as one script to OUT, each block
# introduced by a line that records its place (in $README_EXAMPLES_AT) and one that names it;
# prints how many blocks were taken and how many left out.
extract() {
	: > "$2"
	awk -v out="$2" '
	function flush() {
		if (!runnable || !plain) { skipped++; return }
		taken++
		printf "echo \"README.md:%d\" > \"$README_EXAMPLES_AT\"\n", start >> out
		printf "echo \"== README.md:%d: %s\"\n", start, first >> out
		printf "%s", body >> out
	}
	inblock && /^```[ \t]*$/ { inblock = 0; flush(); next }
	inblock {
		body = body $0 "\n"
		line = $0; sub(/^[ \t]+/, "", line)
		if (line != "" && substr(line, 1, 1) != "#") {
			if (first == "") { first = line; gsub(/["$`\\]/, "\\\\&", first) }
			if (line !~ /^make (demo|check)([ \t]|$)/) plain = 1
		}
		next
	}
	/^```/ {
		inblock = 1; start = NR; body = ""; first = ""; plain = 0
		info = $0; sub(/^```[ \t]*/, "", info); sub(/[ \t].*/, "", info)
		runnable = (info == "sh" && !markedsys)
		markedsys = 0
		next
	}
	/^<!-- needs: systemd -->[ \t]*$/ { markedsys = 1; next }
	/[^ \t]/ { markedsys = 0 }
	END {
		if (inblock) { print "README: a block opened at line " start " is not closed" > "/dev/stderr"; exit 2 }
		print taken + 0, skipped + 0
	}
	' "$1"
}

# run README BUILD_DIR REPO: the blocks of README in a mirror of REPO; 0 when all succeed.
run() {
	readme=$1 build=$2 repo=$3
	W=$(mktemp -d "${TMPDIR:-/tmp}/readme-examples.XXXXXX") || return 1
	counts=$(extract "$readme" "$W/blocks.sh") || { rm -rf "$W"; return 1; }
	set -- $counts
	taken=$1 skipped=$2
	mkdir "$W/work" "$W/work/home" "$W/bin"
	for e in "$repo"/* "$repo"/.[!.]*; do
		[ -e "$e" ] || continue
		n=$(basename "$e")
		case $n in .git|build) continue ;; esac
		ln -s "$e" "$W/work/$n"
	done
	ln -s "$build" "$W/work/build"
	ln -s "${PYTHON:-/usr/bin/python3}" "$W/bin/python3"
	{
		echo 'trap '\''[ -z "${PIMD_PID:-}" ] || { kill "$PIMD_PID" 2>/dev/null; wait "$PIMD_PID" 2>/dev/null; }'\'' EXIT'
		cat "$W/blocks.sh"
		echo 'echo "== done" > "$README_EXAMPLES_AT.done"'
	} > "$W/script.sh"
	( cd "$W/work" && HOME=$W/work/home PATH=$W/bin:$PATH README_EXAMPLES_AT=$W/at \
		timeout "${README_EXAMPLES_TIMEOUT:-900}" sh -e "$W/script.sh" ) > "$W/out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ] && [ -e "$W/at.done" ]; then
		grep '^== README.md:' "$W/out" | sed 's/^== /ok   /'
		echo "readme examples: $taken blocks run, $skipped left out (systemd, make demo/check, not sh)"
		rm -rf "$W"
		return 0
	fi
	at=$(cat "$W/at" 2>/dev/null || echo "README.md (before the first block)")
	[ "$rc" -eq 124 ] && why="timed out after ${README_EXAMPLES_TIMEOUT:-900} s" || why="exit $rc"
	echo "FAIL readme examples: the block at $at failed ($why); the end of its output:"
	tail -n 40 "$W/out" | sed 's/^/     > /'
	rm -rf "$W"
	return 1
}

if [ "${1:-}" = "--self-test" ]; then
	S=$(mktemp -d "${TMPDIR:-/tmp}/readme-selftest.XXXXXX") || exit 1
	trap 'rm -rf "$S"' EXIT
	mkdir "$S/repo" "$S/build"
	fence='```'
	fail=0
	# a passing README: a marked block that would fail, the make-check block, a c block, and two
	# sh blocks sharing a variable; the working directory is the mirror, HOME inside it
	cat > "$S/good.md" <<-EOF
	${fence}sh
	make demo   # would take minutes
	make check
	${fence}

	<!-- needs: systemd -->
	${fence}sh
	false
	${fence}

	${fence}c
	this is not shell
	${fence}

	${fence}sh
	X=shared; touch made-here
	${fence}
	${fence}sh
	[ "\$X" = shared ] && [ -e made-here ] && [ -d build ] && [ "\$HOME" != "$HOME" ]
	${fence}
	EOF
	if out=$(run "$S/good.md" "$S/build" "$S/repo"); then
		echo "$out" | grep -q 'readme examples: 2 blocks run, 3 left out' ||
			{ echo "FAIL self-test: wrong count: $out"; fail=1; }
	else
		echo "FAIL self-test: a README whose runnable blocks pass failed:"; echo "$out"; fail=1
	fi
	[ ! -e "$S/repo/made-here" ] || { echo "FAIL self-test: a block wrote into the checkout"; fail=1; }
	# a failing command in the middle of the second block fails the check and names it
	cat > "$S/bad.md" <<-EOF
	${fence}sh
	true
	${fence}

	text

	${fence}sh
	echo before
	false
	echo after-the-failure
	${fence}
	EOF
	if out=$(run "$S/bad.md" "$S/build" "$S/repo"); then
		echo "FAIL self-test: a failing command passed"; fail=1
	else
		echo "$out" | grep -q 'the block at README.md:7 failed (exit 1)' ||
			{ echo "FAIL self-test: the failing block is not named: $out"; fail=1; }
		! echo "$out" | grep -q after-the-failure ||
			{ echo "FAIL self-test: the commands after the failure ran"; fail=1; }
	fi
	# the marker applies to the next block only, and only right before it
	cat > "$S/marker.md" <<-EOF
	<!-- needs: systemd -->

	text between the marker and the block

	${fence}sh
	false
	${fence}
	EOF
	if run "$S/marker.md" "$S/build" "$S/repo" > /dev/null; then
		echo "FAIL self-test: a marker with text after it left the block out"; fail=1
	fi
	[ $fail -eq 0 ] && echo "readme examples: self-test passed"
	exit $fail
fi

B=$(cd "${1:-build}" && pwd) || exit 1
README=${2:-README.md}
R=$(cd "$(dirname "$0")/.." && pwd)
run "$(cd "$(dirname "$README")" && pwd)/$(basename "$README")" "$B" "$R"
