#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sums up pimctl --json placement answers of the GPT-2-style decoder by operator class, the
classes Torch-PIM's evaluation speaks of (linear layers: GEMM at prefill, thin GEMM/GEMV at
decode; attention; normalization; elementwise; data movement).

    placement-classes.py LABEL=PLACEMENT.json ...

For each answer (one phase: prefill or decode), and each core count in it: how many of the
class's operators pimd places on PIM, out of how many, and the share of the class in the
host time; then the operators on PIM by name.  Operators are the ONNX nodes: regions NODE.K
grouped by NODE.
"""
import json
import sys

LINEAR = ("/qkv/", "/proj/", "/fc/", "/fc_out/", "/lm_head/")
MOVEMENT = ("Gather", "Split", "Transpose", "Concat", "Reshape", "Identity", "Expand", "Slice",
            "Squeeze", "Unsqueeze", "Flatten")
CLASSES = ["linear layers (MatMul)", "attention (QK^T, softmax, xV)", "LayerNorm",
           "elementwise (GELU, residual)", "data movement"]


def op_class(region):
    name, op = region["name"], region["op"]
    if op in ("MatMul", "Gemm") and any(s in name for s in LINEAR):
        return CLASSES[0]
    if op in MOVEMENT:
        return CLASSES[4]
    if "/attn/" in name:
        return CLASSES[1]
    if op == "LayerNormalization":
        return CLASSES[2]
    return CLASSES[3]


def summary(label, path):
    answer = json.load(open(path))
    cores = [e["n_core"] for e in answer["estimates"]]
    print("%s: operators on PIM / operators of the class (share of host time)" % label)
    print("  %-31s" % "class" + "".join("%22s" % ("N_core %d" % c) for c in cores))
    rows = {c: {} for c in CLASSES}
    for e in answer["estimates"]:
        ops = {}
        for r in e["regions"]:
            node = r["name"].rsplit(".", 1)[0]
            o = ops.setdefault(node, {"cls": op_class(r), "pim": False, "t": 0.0})
            o["pim"] = o["pim"] or r["place"] == "pim"
            o["t"] += r["t_host"] or 0.0
        total = sum(o["t"] for o in ops.values()) or 1.0
        for cls in CLASSES:
            mine = [o for o in ops.values() if o["cls"] == cls]
            rows[cls][e["n_core"]] = "%d/%d (%.0f%%)" % (
                sum(o["pim"] for o in mine), len(mine), 100.0 * sum(o["t"] for o in mine) / total)
    for cls in CLASSES:
        print("  %-31s" % cls + "".join("%22s" % rows[cls][c] for c in cores))
    for e in answer["estimates"]:
        on = sorted({r["name"].rsplit(".", 1)[0] for r in e["regions"] if r["place"] == "pim"})
        print("  on PIM at N_core %d: %s" % (e["n_core"], ", ".join(on) if on else "none"))
    for e in answer["estimates"]:
        print("  N_core %d: %d regions offloaded, estimated speedup %.2fx (%s)" % (
            e["n_core"], e["offloaded"], e["speedup"], e["speedup_kind"]))


def main():
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[1:]):
        sys.exit("usage: placement-classes.py LABEL=PLACEMENT.json ...")
    for a in sys.argv[1:]:
        label, path = a.split("=", 1)
        summary(label, path)


if __name__ == "__main__":
    main()
