#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Host code per ONNX node class, timed beside PyTorch's CPU time for the same op (make
bench-hostcode; run by bench/bench_hostcode.sh).

    bench_hostcode.py BUILD_DIR WORK_DIR [--width D] [--seconds S] [--classes NAME,...]

For each class: a small PyTorch module at LLM width (d 4096 unless --width) is exported with
torch.onnx.export (opset 17, what a user's export writes for that op), extracted by
BUILD_DIR/pim-extract --weights zero --emit-model, and its library timed region by region by
BUILD_DIR/bench/hostcode-run (its own pim_region_enter/exit hooks on CLOCK_MONOTONIC: the
median over warm runs of the sum of the model's regions).  PyTorch's time is the same module
run by torch with torch.set_num_threads(1), median over warm runs, measured just before and
again just after the host code (the two sets pooled), so both see the same machine.  One
thread on both sides; timing here is noisy, so the table gives ratios, not absolute claims.

Goals: memory-bound nodes (elementwise, norms, softmax) within 1.5x of PyTorch's
time, GEMVs no slower than PyTorch's (1.0x), GEMMs within 3x.
"""
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch"))
from export import RMSNorm  # noqa: E402  (LLaMA's, as examples/torch writes it)

D_REAL = 4096
TOKENS = 128


class MatMulW(nn.Module):
    """x @ W with W stored [in, out]: MatMul with the weight as its initializer."""

    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x):
        return x @ self.w


class Fn(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *xs):
        return self.f(*xs)


def classes(d):
    """(name, shape text, module, inputs, goal ratio, kind) for each class at width d."""
    heads, hd = 16, d // 16
    r = lambda *s: torch.randn(*s)
    return [
        ("gemv-matmul", "x[1,%d] @ W[%d,%d] (W [in,out])" % (d, d, d), MatMulW(d), [r(1, d)], 1.0, "GEMV"),
        ("gemv-linear-decode", "Linear(%d) on [1,1,%d]: MatMul W^T [in,out]" % (d, d),
         nn.Linear(d, d), [r(1, 1, d)], 1.0, "GEMV"),
        ("gemv-gemm", "Linear(%d) on [1,%d]: Gemm W [out,in]" % (d, d),
         nn.Linear(d, d), [r(1, d)], 1.0, "GEMV"),
        ("add", "[%d,%d] + [%d,%d]" % (TOKENS, d, TOKENS, d), Fn(torch.add), [r(TOKENS, d), r(TOKENS, d)],
         1.5, "elementwise"),
        ("gelu-tanh", "gelu(tanh) [%d,%d]" % (TOKENS, d), Fn(lambda x: F.gelu(x, approximate="tanh")),
         [r(TOKENS, d)], 1.5, "elementwise"),
        ("layernorm", "LayerNorm(%d) [1,%d,%d]" % (d, TOKENS, d), nn.LayerNorm(d), [r(1, TOKENS, d)], 1.5, "norm"),
        ("rmsnorm", "RMSNorm(%d) [1,%d,%d]" % (d, TOKENS, d), RMSNorm(d), [r(1, TOKENS, d)], 1.5, "norm"),
        ("softmax", "softmax [1,%d,%d,%d] last axis" % (heads * 2, TOKENS, TOKENS),
         Fn(lambda x: F.softmax(x, dim=-1)), [r(1, heads * 2, TOKENS, TOKENS)], 1.5, "softmax"),
        ("gemm-attn-scores", "q[1,%d,%d,%d] @ k^T (attention scores)" % (heads, TOKENS, hd),
         Fn(lambda q, k: q @ k.transpose(-2, -1)), [r(1, heads, TOKENS, hd), r(1, heads, TOKENS, hd)],
         3.0, "GEMM"),
    ]


def torch_times(module, inputs, seconds, min_runs=10, max_runs=100000):
    with torch.inference_mode():
        for _ in range(3):
            module(*inputs)
        out = []
        t_end = time.perf_counter() + seconds
        while len(out) < max_runs and (len(out) < min_runs or time.perf_counter() < t_end):
            t0 = time.perf_counter_ns()
            module(*inputs)
            out.append(time.perf_counter_ns() - t0)
    return out


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def hostcode(build, work, name, module, inputs, seconds):
    """Exports, extracts and times one class: (regions, median ns of the sum of regions)."""
    onnx_path = os.path.join(work, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(module, tuple(inputs), onnx_path, opset_version=17, do_constant_folding=True,
                          input_names=["x%d" % i for i in range(len(inputs))], output_names=["y"])
    man, lib = os.path.join(work, name + ".json"), os.path.join(work, name + ".so")
    p = subprocess.run([os.path.join(build, "pim-extract"), "--weights", "zero", "-o", man, "--emit-model", lib,
                        onnx_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        lines = p.stdout.strip().splitlines()
        return None, "pim-extract failed: " + (lines[-1] if lines else "exit status %d" % p.returncode)
    p = subprocess.run([os.path.join(build, "bench", "hostcode-run"), "--seconds", str(seconds), man, lib],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip() or "hostcode-run: exit status %d" % p.returncode
    regions, total = [], None
    for line in p.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "region":
            regions.append({"name": f[2], "op": f[3], "median": int(f[7])})
        elif f[0] == "total":
            total = (int(f[1]), int(f[2]))
    return {"regions": regions, "ns": sum(r["median"] for r in regions), "runs": total[0],
            "call_ns": total[1]}, None


def fmt_ns(ns):
    if ns >= 1e6:
        return "%.2f ms" % (ns / 1e6)
    if ns >= 1e3:
        return "%.1f us" % (ns / 1e3)
    return "%.0f ns" % ns


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit("usage: bench_hostcode.py BUILD_DIR WORK_DIR [--width D] [--seconds S] [--classes NAME,...]")
    build, work = args[0], args[1]
    width, seconds, only = D_REAL, 1.0, None
    rest = args[2:]
    while rest:
        opt, val = rest.pop(0), rest.pop(0) if rest else None
        if opt == "--width":
            width = int(val)
        elif opt == "--seconds":
            seconds = float(val)
        elif opt == "--classes":
            only = val.split(",")
        else:
            sys.exit("bench_hostcode.py: unknown option %s" % opt)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(work, exist_ok=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # loads the BLAS
    blas = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and ".so" in l})
    print("host code (pim-extract --weights zero, hostcode-run) beside PyTorch %s, one thread each; %s" % (
        torch.__version__, cpu))
    print("PyTorch's BLAS: %s" % (", ".join(os.path.basename(b) for b in blas) or "none loaded"))
    if not any("openblas" in b or "blis" in b or "mkl" in b for b in blas):
        print("note: Debian's reference BLAS: PyTorch's MatMul/Gemm are slower than with the BLAS a default "
              "install brings (python3-torch recommends libopenblas0): install libopenblas0-pthread for a "
              "fair baseline (bench_hostcode.sh then uses it)")
    print("load average before: %s" % open("/proc/loadavg").read().split()[0])
    rows = []
    for name, shape, module, inputs, goal, kind in classes(width):
        if only and name not in only:
            continue
        module.eval()
        t_a = torch_times(module, inputs, seconds / 2)
        hc, err = hostcode(build, work, name, module, inputs, seconds)
        t_b = torch_times(module, inputs, seconds / 2)
        with torch.no_grad():
            out = module(*inputs)
        params = list(module.parameters())
        nbytes = tensor_bytes(list(inputs) + params + [out])
        rows.append((name, shape, kind, goal, hc, err, statistics.median(t_a + t_b), nbytes, out.numel()))
        sys.stdout.write(".")
        sys.stdout.flush()
    print()
    hdr = "%-19s %-48s %4s %10s %10s %7s %7s %7s %8s %6s %s" % (
        "class", "shape", "nest", "pimd host", "PyTorch", "ratio", "GB/s", "torch", "ns/elem", "goal", "")
    print(hdr)
    met = missed = 0
    for name, shape, kind, goal, hc, err, t_ns, nbytes, nout in rows:
        if hc is None:
            print("%-19s %-48s %s" % (name, shape, err))
            missed += 1
            continue
        ratio = hc["ns"] / t_ns
        ok = ratio <= goal
        met, missed = met + ok, missed + (not ok)
        print("%-19s %-48s %4d %10s %10s %6.2fx %7.2f %7.2f %8.3f %5.1fx %s" % (
            name, shape, len(hc["regions"]), fmt_ns(hc["ns"]), fmt_ns(t_ns), ratio, nbytes / hc["ns"],
            nbytes / t_ns, hc["ns"] / nout, goal, "pass" if ok else "miss"))
    print("(nest: regions of the model library; pimd host: median per run of their sum (%s); PyTorch: "
          "median per call; ratio = pimd host / PyTorch; GB/s: bytes of inputs, weights and output "
          "over the time, pimd's then PyTorch's; ns/elem: pimd host per output element; goal: "
          "the largest ratio that passes)" % ("--weights zero"))
    print("load average after: %s" % open("/proc/loadavg").read().split()[0])
    print("bench-hostcode: %d passed, %d missed" % (met, missed))


if __name__ == "__main__":
    main()
