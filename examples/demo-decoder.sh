#!/bin/sh
# demo-decoder.sh BUILD_DIR: the PyTorch path on the paper's kind of workload (make demo-decoder).
# Exports the GPT-2-style decoder of examples/torch/export.py (2 blocks, d 64) with Debian's
# python3-torch at prefill (128 tokens) and at one decode step (1 token, its 128-token K/V
# cache as inputs), extracts both with pim-extract, starts pimd on a private socket and
# database, profiles both libraries through it (hardware counters where the host has them, the
# timing backend otherwise: pimd says which), prints the placement of both at 32, 64 and 128
# PIM cores by operator, then the operators on PIM by class (examples/placement-classes.py),
# and stops pimd.
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
. "$HERE/private-pimd.sh"
private_tmpdir pimd-demo-decoder

# Bold command lines on a terminal only: a pipe or a file gets plain text.
if [ -t 1 ]; then BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m'); else BOLD= PLAIN=; fi
step() { printf '\n%s$ %s%s\n' "$BOLD" "$*" "$PLAIN"; "$@"; }

# The export's own messages are shown: torch's tracer warnings, and what went wrong if it fails.
step "$PYTHON" "$HERE/torch/export.py" "$T/models" --models gpt2-prefill,gpt2-decode
for n in gpt2-prefill gpt2-decode; do
	step "$B/pim-extract" -o "$T/$n.json" --emit-model "$T/$n.so" "$T/models/$n.onnx"
done
echo
echo "Starting pimd on $T/pimd.sock (database $T/state/pimd.db)"
private_pimd_start "$B" "$T"
step "$B/pimctl" status
for n in gpt2-prefill gpt2-decode; do
	step "$B/pimctl" model load "$T/$n.json"
	step "$B/pimctl" profile "$n" --library "$T/$n.so" --reps 5
	step "$B/pimctl" placement "$n" --cores 32,64,128 --granularity operator --summary
	"$B/pimctl" --json placement "$n" --cores 32,64,128 --granularity operator > "$T/$n.placement.json"
done
printf '\n%sBy operator class%s\n' "$BOLD" "$PLAIN"
"$PYTHON" "$HERE/placement-classes.py" "prefill (128 tokens)=$T/gpt2-prefill.placement.json" \
	"decode (1 token, 128-token K/V cache)=$T/gpt2-decode.placement.json"
# What the estimate means for each phase: a speedup under 1 is a plan slower than the host alone.
printf '\n%sAgainst the host alone%s\n' "$BOLD" "$PLAIN"
"$PYTHON" - "$T/gpt2-prefill.placement.json" "$T/gpt2-decode.placement.json" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    phase = path.rsplit("/", 1)[-1].split(".")[0]
    for e in json.load(open(path))["estimates"]:
        n, s = int(e["n_core"]), e["speedup"]
        if e["offloaded"] == 0:
            verdict = "nothing offloaded: the host alone runs it"
        elif s < 1:
            move = e["t_hybrid"] - e["t_host"] - e["t_pim"]
            verdict = ("the host alone is faster: keep this phase on the host (with PIM "
                       "%.0f us = %.0f on the host + %.0f on PIM + %.0f moving data, against "
                       "%.0f us on the host alone)" % (e["t_hybrid"] * 1e6, e["t_host"] * 1e6,
                                                      e["t_pim"] * 1e6, move * 1e6, e["t_cpu"] * 1e6))
        else:
            verdict = "faster than the host alone, by this estimate"
        print("%s at %d PIM cores: estimated speedup %.2fx, %d regions on PIM: %s"
              % (phase, n, s, e["offloaded"], verdict))
EOF
private_pimd_stop
printf '\npimd stopped\n'
