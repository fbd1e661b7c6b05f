#!/bin/sh
# bench_hostcode.sh BUILD_DIR: pim-extract's host code per ONNX node class at LLM width, timed
# region by region beside PyTorch's own CPU time for the same op in the same run
# (make bench-hostcode).
#
# Classes: GEMV as MatMul with the weight [in, out] (x @ W), as nn.Linear on the [1, 1, d]
# activations of a decode step (torch.onnx.export writes MatMul with the transposed weight as
# its initializer), as nn.Linear on [1, d] (Gemm, transB, weight [out, in]); at d 4096, a
# 64 MiB fp32 weight each.  Elementwise add and tanh GELU, LayerNorm and RMSNorm on
# [128, 4096]; softmax over [1, 32, 128, 128]; a GEMM: attention scores q @ k^T at 128 tokens
# (16 heads of 256).  Each is a PyTorch module exported at opset 17, extracted with pim-extract
# --weights zero --emit-model, and run by BUILD_DIR/bench/hostcode-run (bench/hostcode_run.c:
# the library's hooks timed with clock_gettime, median over warm runs); PyTorch runs the same
# module with torch.set_num_threads(1), just before and just after (bench/bench_hostcode.py).
# The table gives each class's ratio against its goal: memory-bound nodes within
# 1.5x of PyTorch, GEMVs 1.0x, GEMMs 3x.  Timing on a shared machine is noisy: ratios, not
# absolute figures.
#
# HOSTCODE_WIDTH (default 4096) and HOSTCODE_SECONDS (measured seconds per side and class,
# default 1) change the sizes and the effort; HOSTCODE_CLASSES (comma-separated) picks classes.
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
for f in "$B/pim-extract" "$B/bench/hostcode-run"; do
	[ -x "$f" ] || { echo "bench_hostcode.sh: $f is missing: make B=$B bench-hostcode builds it" >&2; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-hostcode.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
set -- --width "${HOSTCODE_WIDTH:-4096}" --seconds "${HOSTCODE_SECONDS:-1}"
[ -z "${HOSTCODE_CLASSES:-}" ] || set -- "$@" --classes "$HOSTCODE_CLASSES"
# PyTorch with OpenBLAS where it is installed (what python3-torch's Recommends bring; Debian's
# reference BLAS is no baseline for GEMV), for this process only: the system's libblas.so.3
# alternative stays as it is.  One thread on its side too.
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -e "$OPENBLAS/libblas.so.3" ]; then
	LD_LIBRARY_PATH=$OPENBLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS OMP_NUM_THREADS
# torch.onnx.export's warnings (constant folding, tracing) are not the benchmark's output.
"$PYTHON" -W ignore "$HERE/bench_hostcode.py" "$B" "$T" "$@"
