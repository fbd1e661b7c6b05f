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

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$PYTHON" "$HERE/torch/export.py" "$T/models" --models gpt2-prefill,gpt2-decode 2>/dev/null
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
printf '\n\033[1mBy operator class\033[0m\n'
"$PYTHON" "$HERE/placement-classes.py" "prefill (128 tokens)=$T/gpt2-prefill.placement.json" \
	"decode (1 token, 128-token K/V cache)=$T/gpt2-decode.placement.json"
private_pimd_stop
printf '\npimd stopped\n'
