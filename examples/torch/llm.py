#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Exports GPT-J-6B- and LLaMA-7B-shaped decode steps to ONNX (opset 17) for pim-extract.

    llm.py OUT_DIR [--models gptj,llama] [--layers N] [--dtype fp32|fp16] [--external-data]
           [--lean] [--width D] [--vocab V] [--seed N]

One decode step each: batch 1, one new token at position 128, the 128 cached tokens of every
layer as inputs (past_k, past_v: [layers, 1, heads, 128, head_dim]); outputs the logits and
the grown cache (present_k, present_v: 129 tokens).  Random weights; nn.Linear throughout, as
users write these models:

  gptj   GPT-J-6B (Wang and Komatsuzaki 2021, the Hugging Face GPTJ layout): d 4096, 16 heads
         of 256, rotary embeddings on the first 64 of each head (rotary_dim, interleaved pairs),
         one LayerNorm per block feeding attention and MLP in parallel, q/k/v/out projections
         without bias, FFN 16384 with tanh GELU (fc_in, fc_out with bias); final LayerNorm, LM
         head with bias, vocab 50400
  llama  LLaMA-7B (Touvron et al. 2023): d 4096, 32 heads of 128, rotary embeddings on the
         whole head (rotate_half), RMSNorm (eps 1e-6) before attention and before the MLP,
         SwiGLU FFN 11008 (w1 gate, w3 up, w2 down), no biases; final RMSNorm, LM head, vocab
         32000

Token embedding, --layers blocks (default 2), final norm and LM head.  --width D scales d, the
FFN width and GPT-J's rotary_dim by D/4096 (head counts stay; a small variant to develop
with); --vocab V replaces the vocabulary size.

What torch.onnx.export (1.13) writes for nn.Linear on the [1, 1, d] activations of a decode
step: MatMul with the weight as a transposed initializer, [in, out] (the Transpose is folded),
followed by Add for a bias; nn.Linear on a 2-D input with a bias would be Gemm (transB = 1,
weight [out, in]).  The script prints the op census of each model it writes.

Files: OUT_DIR/NAME-decode.onnx (NAME gptj or llama; the manifest's model name is
NAME-decode) and OUT_DIR/NAME-decode/test_data_set_0/input_K.pb, output_K.pb (serialized
TensorProto, the layout of ONNX's backend tests: the inputs and PyTorch's outputs, for
tests/compiler/onnx-run).  --external-data writes the initializers to
OUT_DIR/NAME-decode.onnx.data (ONNX external data, one file): needed over protobuf's 2 GB
limit (GPT-J at d 4096 and 2 layers is 3.3 GB in fp32, LLaMA 2.7 GB), refused without it.

--dtype fp16: torch 1.13 has no half-precision CPU kernels for LayerNorm or addmm, so tracing
in fp16 fails; the model is exported in fp32 and then converted with python3-onnx: every float
initializer, Constant and ConstantOfShape value, Cast to float, graph input, output and
value_info becomes float16 (LayerNormalization keeps stash_type 1: statistics in fp32).
The test data are the fp32 run's, rounded to fp16 (compare with a tolerance fit for fp16).

The export runs tensor by tensor through the external data (torch's exporter writes one file
per tensor past 2 GB; they are joined into NAME-decode.onnx.data), but torch holds the model in
fp32 and copies it while exporting: peak memory about twice the fp32 weights (7.5 GB for
GPT-J at 2 layers, 2 minutes here).

--lean (automatic past 8 GB of fp32 weights: full depth, --layers 28) never holds a weight:
every parameter of 16 MiB or more is a stride-0 view, passed to the traced model as an extra
input (so torch neither copies nor folds it; nn.Linear traces through a function that writes
the same MatMul of the transposed weight and Add of the bias, without computing), and the
weights are written straight to NAME-decode.onnx.data in the target dtype from a fixed random
pool (std 0.02), each rotated so that no two are equal, the Transposes folded as torch folds
them.  The graph is the same as the plain export's (same nodes and names; checked at d 256:
the same regions and allocations after pim-extract), the test data have no reference outputs.
Full-depth GPT-J-6B (28 layers, 6.05 G parameters) in fp16: 12.1 GB of data, about a minute,
peak RSS 1.1 GB.
Needs python3-torch (1.13, CPU) and python3-onnx from Debian.
"""
import collections
import contextlib
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, numpy_helper

from export import RMSNorm, rotate_half  # examples/torch/export.py, beside this file

PAST = 128  # cached tokens; the new token is at position PAST
D_REAL = 4096


class Shape:
    def __init__(self, name, d, heads, ffn, vocab, rotary_dim, layers):
        self.name, self.d, self.heads, self.ffn, self.vocab = name, d, heads, ffn, vocab
        self.rotary_dim, self.layers = rotary_dim, layers
        self.hd = d // heads


def gptj_shape(layers, width, vocab):
    s = width / D_REAL
    rd = max(2, int(64 * s) // 2 * 2)
    return Shape("gptj", width, 16, int(16384 * s), vocab or 50400, rd, layers)


def llama_shape(layers, width, vocab):
    s = width / D_REAL
    return Shape("llama", width, 32, int(11008 * s), vocab or 32000, width // 32, layers)


def rotary_table(dim, pos, base=10000.0):
    """cos and sin of position pos for dim/2 frequencies (constants: the position is fixed)."""
    inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    ang = pos * inv
    return ang.cos(), ang.sin()


# ---------------------------------------------------------------- GPT-J
def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class GptjAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.d, c.d, bias=False)
        self.k_proj = nn.Linear(c.d, c.d, bias=False)
        self.v_proj = nn.Linear(c.d, c.d, bias=False)
        self.out_proj = nn.Linear(c.d, c.d, bias=False)
        cos, sin = rotary_table(c.rotary_dim, PAST)
        # GPT-J repeats each frequency for the two elements of a pair.
        self.register_buffer("cos", cos.repeat_interleave(2))
        self.register_buffer("sin", sin.repeat_interleave(2))

    def rotary(self, x):
        rd = self.c.rotary_dim
        xr, xp = x[..., :rd], x[..., rd:]
        xr = xr * self.cos + rotate_every_two(xr) * self.sin
        return torch.cat((xr, xp), dim=-1)

    def forward(self, x, past_k, past_v):
        c = self.c
        b, t, _ = x.shape
        q = self.rotary(self.q_proj(x).view(b, t, c.heads, c.hd)).transpose(1, 2)
        k = self.rotary(self.k_proj(x).view(b, t, c.heads, c.hd)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.heads, c.hd).transpose(1, 2)
        k = torch.cat((past_k, k), dim=2)
        v = torch.cat((past_v, v), dim=2)
        att = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(c.hd), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c.d)
        return self.out_proj(y), k, v


class GptjBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.d)
        self.attn = GptjAttention(c)
        self.fc_in = nn.Linear(c.d, c.ffn)
        self.fc_out = nn.Linear(c.ffn, c.d)

    def forward(self, x, past_k, past_v):
        h = self.ln_1(x)
        a, k, v = self.attn(h, past_k, past_v)
        m = self.fc_out(F.gelu(self.fc_in(h), approximate="tanh"))
        return x + a + m, k, v


# ---------------------------------------------------------------- LLaMA
# RMSNorm and rotate_half are export.py's (its LLaMA-style block).

class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.wq = nn.Linear(c.d, c.d, bias=False)
        self.wk = nn.Linear(c.d, c.d, bias=False)
        self.wv = nn.Linear(c.d, c.d, bias=False)
        self.wo = nn.Linear(c.d, c.d, bias=False)
        cos, sin = rotary_table(c.hd, PAST)
        self.register_buffer("cos", torch.cat((cos, cos)))
        self.register_buffer("sin", torch.cat((sin, sin)))

    def forward(self, x, past_k, past_v):
        c = self.c
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, c.heads, c.hd).transpose(1, 2)
        k = self.wk(x).view(b, t, c.heads, c.hd).transpose(1, 2)
        v = self.wv(x).view(b, t, c.heads, c.hd).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k = torch.cat((past_k, k), dim=2)
        v = torch.cat((past_v, v), dim=2)
        att = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(c.hd), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c.d)
        return self.wo(y), k, v


class LlamaBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention_norm = RMSNorm(c.d)
        self.attention = LlamaAttention(c)
        self.ffn_norm = RMSNorm(c.d)
        self.w1 = nn.Linear(c.d, c.ffn, bias=False)
        self.w3 = nn.Linear(c.d, c.ffn, bias=False)
        self.w2 = nn.Linear(c.ffn, c.d, bias=False)

    def forward(self, x, past_k, past_v):
        a, k, v = self.attention(self.attention_norm(x), past_k, past_v)
        x = x + a
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h)), k, v


# ---------------------------------------------------------------- the decode step
def lean(module, min_bytes):
    """Makes every parameter of min_bytes or more (fp32) of module lean (--lean): a stride-0
    view of one number, the shape a trace needs and no memory, held as a plain attribute
    (listed in the module's lean_weights) that the model takes as an input, so
    that the exporter never looks at its values.  nn.Linear then traces through LeanLinear."""
    if min_bytes is None:
        return module
    for mod in module.modules():
        for pname, p in list(mod._parameters.items()):
            if p is not None and p.numel() * 4 >= min_bytes:
                del mod._parameters[pname]
                setattr(mod, pname, torch.zeros(1).expand(p.shape))
                mod.lean_weights = getattr(mod, "lean_weights", []) + [pname]
        if isinstance(mod, nn.Linear) and "weight" in getattr(mod, "lean_weights", []):
            mod.forward = lambda x, mod=mod: LeanLinear.apply(x, mod.weight, mod.bias)
    return module


def lean_inputs_of(model):
    """{name: tensor} of the model's lean weights (h.0.attn.q_proj.weight: ...), and from now
    on the model's forward takes them as inputs after its own, forward(ids, past_k, past_v,
    *weights), binding each to its module for the call: the trace then sees graph inputs where
    it would see parameters, under the same module scopes (node names)."""
    slots = [(name + "." + w if name else w, mod, w) for name, mod in model.named_modules()
             for w in getattr(mod, "lean_weights", [])]
    cls_forward = type(model).forward

    def forward(ids, past_k, past_v, *weights):
        for (_, mod, w), t in zip(slots, weights):
            setattr(mod, w, t)
        return cls_forward(model, ids, past_k, past_v)

    model.forward = forward
    return {n: getattr(mod, w) for n, mod, w in slots}


@contextlib.contextmanager
def no_lean_clones():
    """torch.jit's tracer (1.13, ONNXTracedModule) clones every input and parameter before a
    trace, keeping the clones to the end: a stride-0 parameter would become a full copy, all
    of them at once.  While it is on, a lean tensor's clone is the tensor itself (the clones
    are only kept for a caller that asks for them; export does not)."""
    clone = torch.Tensor.clone

    def lean_clone(self, *args, **kwargs):
        return self if is_lean(self) else clone(self, *args, **kwargs)

    torch.Tensor.clone = lean_clone
    try:
        yield
    finally:
        torch.Tensor.clone = clone


class LeanLinear(torch.autograd.Function):
    """nn.Linear for a lean export: what torch.onnx.export writes for it (MatMul of the input
    and the transposed weight, Add of the bias), without computing anything during the trace
    (a product with a stride-0 weight would copy it)."""

    @staticmethod
    def forward(ctx, x, w, b):
        return x.new_zeros(x.shape[:-1] + (w.shape[0],))

    @staticmethod
    def symbolic(g, x, w, b):
        y = g.op("MatMul", x, g.op("Transpose", w, perm_i=[1, 0]))
        return y if b is None or b.node().mustBeNone() else g.op("Add", y, b)




def is_lean(t):
    return t.numel() > 1 and all(st == 0 for st in t.stride())


class Decoder(nn.Module):
    def __init__(self, c, lean_min_bytes=None):
        super().__init__()
        self.c = c
        # One part at a time, each made lean at once: memory stays about one block's weights.
        self.embed = lean(nn.Embedding(c.vocab, c.d), lean_min_bytes)
        block = GptjBlock if c.name == "gptj" else LlamaBlock
        self.h = nn.ModuleList([lean(block(c), lean_min_bytes) for _ in range(c.layers)])
        if c.name == "gptj":
            self.norm = nn.LayerNorm(c.d)
            self.lm_head = lean(nn.Linear(c.d, c.vocab), lean_min_bytes)
        else:
            self.norm = RMSNorm(c.d)
            self.lm_head = lean(nn.Linear(c.d, c.vocab, bias=False), lean_min_bytes)

    def forward(self, ids, past_k, past_v):
        x = self.embed(ids)
        ks, vs = [], []
        for i, blk in enumerate(self.h):
            x, k, v = blk(x, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return self.lm_head(self.norm(x)), torch.stack(ks), torch.stack(vs)


# ---------------------------------------------------------------- writing
F16_NP = np.float16


def to_f16_tensor(t):
    """A FLOAT TensorProto with its data in place, converted to FLOAT16 (same name)."""
    arr = numpy_helper.to_array(t).astype(F16_NP)
    n = numpy_helper.from_array(arr, t.name)
    t.CopyFrom(n)


def graph_to_f16(g):
    """Every float of the graph in float16: types, constants, Casts (see --dtype fp16)."""
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.elem_type == TensorProto.FLOAT:
            tt.elem_type = TensorProto.FLOAT16
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                to_f16_tensor(a.t)
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16


def finish(tmp, model_path, out, name, external, dtype):
    """Joins what torch wrote in tmp into OUT/NAME.onnx (+ NAME.onnx.data), converted to dtype."""
    m = onnx.load(model_path, load_external_data=False)
    inits = m.graph.initializer
    went_external = any(t.data_location == TensorProto.EXTERNAL for t in inits)
    if went_external and not external:
        sys.exit("llm.py: %s is over protobuf's 2 GB limit: use --external-data" % name)
    if dtype == "fp16":
        graph_to_f16(m.graph)
    path = os.path.join(out, name + ".onnx")
    data_name = name + ".onnx.data"
    data_path = os.path.join(out, data_name)
    if os.path.exists(data_path):
        os.unlink(data_path)
    stored = 0
    if external:
        with open(data_path, "wb") as data:
            for t in inits:
                if t.data_location == TensorProto.EXTERNAL:
                    info = {e.key: e.value for e in t.external_data}
                    src = os.path.join(tmp, info["location"])
                    with open(src, "rb") as f:
                        f.seek(int(info.get("offset", 0)))
                        n = int(info["length"]) if "length" in info else -1
                        raw = f.read(n)
                    os.unlink(src)  # keep the temporary copy small as we go
                    del t.external_data[:]
                    t.data_location = TensorProto.DEFAULT
                    t.raw_data = raw
                if dtype == "fp16" and t.data_type == TensorProto.FLOAT:
                    to_f16_tensor(t)
                raw = t.raw_data if t.HasField("raw_data") else None
                if raw is None or len(raw) < 1024:
                    continue  # small tensors stay in the model
                off = data.tell()
                pad = (-off) % 4096  # page-aligned tensors (mmap-friendly)
                data.write(b"\0" * pad)
                off += pad
                data.write(raw)
                stored += len(raw)
                t.ClearField("raw_data")
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", data_name), ("offset", str(off)), ("length", str(len(raw)))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
    elif dtype == "fp16":
        for t in inits:
            if t.data_type == TensorProto.FLOAT:
                to_f16_tensor(t)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path, stored, m


RANDOM_POOL = 1 << 20  # values, repeated through every lean weight


def write_raw(data, data_name, t, raw, chunk=None, length=0):
    """Makes t external data at the next page boundary of the data file: raw, or chunk
    repeated to length bytes.  Returns the bytes written."""
    off = data.tell()
    pad = (-off) % 4096  # page-aligned tensors
    data.write(b"\0" * pad)
    off += pad
    if raw is not None:
        data.write(raw)
        length = len(raw)
        t.ClearField("raw_data")
    else:
        whole, rest = divmod(length, len(chunk))
        for _ in range(whole):
            data.write(chunk)
        data.write(chunk[:rest])
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in (("location", data_name), ("offset", str(off)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return length


def finish_lean(model_path, out, name, dtype, lean_inputs):
    """A lean export: torch wrote the small parameters as initializers and left the lean
    weights as graph inputs (lean_inputs_of).  Each lean input becomes an initializer of random
    values (a fixed pool, std 0.02), written straight to OUT/NAME.onnx.data one at a time; a
    Transpose of one (nn.Linear's weight) is folded here as torch's constant folding would
    fold it for a parameter: its output becomes the initializer, [in, out].  The small
    initializers go to the data file too (from 1 KiB), converted to dtype."""
    m = onnx.load(model_path)
    g = m.graph
    if dtype == "fp16":
        graph_to_f16(g)
    lean = {i.name: i for i in g.input if i.name in lean_inputs}
    uses = collections.Counter(x for n in g.node for x in n.input)
    made, nodes = [], []
    for n in g.node:
        if n.op_type == "Transpose" and n.input[0] in lean:
            perm = [list(a.ints) for a in n.attribute if a.name == "perm"]
            shape = list(lean_inputs[n.input[0]].shape)
            perm = perm[0] if perm else list(range(len(shape)))[::-1]
            made.append((n.output[0], [shape[i] for i in perm], lean[n.input[0]].type.tensor_type.elem_type))
            uses[n.input[0]] -= 1
        else:
            nodes.append(n)
    made += [(p, list(lean_inputs[p].shape), v.type.tensor_type.elem_type) for p, v in lean.items() if uses[p] > 0]
    pool = (np.random.default_rng(0).standard_normal(RANDOM_POOL) * 0.02).astype(np.float32)
    path = os.path.join(out, name + ".onnx")
    data_name = name + ".onnx.data"
    stored = random_bytes = 0
    with open(os.path.join(out, data_name), "wb") as data:
        for t in g.initializer:  # the small ones torch wrote
            if dtype == "fp16" and t.data_type == TensorProto.FLOAT:
                to_f16_tensor(t)
            if t.HasField("raw_data") and len(t.raw_data) >= 1024:
                stored += write_raw(data, data_name, t, t.raw_data)
        for k, (init_name, shape, elem) in enumerate(made):
            t = TensorProto()
            t.name, t.data_type = init_name, elem
            t.dims.extend(shape)
            np_type = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem]
            # Rotated by a step of its own: no two weights hold the same values (an extractor
            # would merge equal constants into one allocation).
            chunk = np.roll(pool, 7919 * (k + 1)).astype(np_type).tobytes()
            n = int(np.prod(shape))
            nbytes = write_raw(data, data_name, t, None, chunk, n * np.dtype(np_type).itemsize)
            stored += nbytes
            random_bytes += nbytes
            g.initializer.append(t)
    keep = []
    for i in g.input:
        if i.name not in lean:
            v = onnx.ValueInfoProto()
            v.CopyFrom(i)
            keep.append(v)
    del g.input[:]
    g.input.extend(keep)
    kept = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        kept.append(c)
    del g.node[:]
    g.node.extend(kept)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path, stored, random_bytes, m


def census(m):
    ops = collections.Counter(n.op_type for n in m.graph.node)
    return ", ".join("%s %d" % kv for kv in sorted(ops.items()))


def linear_forms(m):
    """How the projections came out: MatMul with an [in, out] initializer, or Gemm."""
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    forms = collections.Counter()
    for n in m.graph.node:
        if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in inits:
            forms["MatMul x W[in, out]"] += 1
        elif n.op_type == "Gemm":
            tb = any(a.name == "transB" and a.i for a in n.attribute)
            forms["Gemm W[out, in] (transB)" if tb else "Gemm W[in, out]"] += 1
    return ", ".join("%s: %d" % kv for kv in sorted(forms.items()))


def param_count(c):
    """Parameters of the decoder (the weights that matter; norms and biases roughly)."""
    if c.name == "gptj":
        block = 4 * c.d * c.d + 2 * c.d * c.ffn + c.ffn + 3 * c.d
        return 2 * c.vocab * c.d + c.vocab + c.layers * block + 2 * c.d
    return 2 * c.vocab * c.d + c.layers * (4 * c.d * c.d + 3 * c.d * c.ffn + 2 * c.d) + c.d


LEAN_AUTO = 8e9        # fp32 bytes of parameters past which the export is lean
LEAN_MIN_BYTES = int(os.environ.get("LLM_LEAN_MIN_BYTES", 16 << 20))  # smaller ones stay real


def export(out, c, dtype, external, lean_wanted):
    name = c.name + "-decode"
    fp32_bytes = 4 * param_count(c)
    lean_export = lean_wanted or fp32_bytes > LEAN_AUTO
    if lean_export and not lean_wanted:
        print("%s: %.1f GB of fp32 parameters: a lean export (--lean)" % (name, fp32_bytes / 1e9))
    external = external or lean_export
    model = Decoder(c, LEAN_MIN_BYTES if lean_export else None).eval()
    ids = torch.randint(0, c.vocab, (1, 1))
    past_k = torch.randn(c.layers, 1, c.heads, PAST, c.hd)
    past_v = torch.randn(c.layers, 1, c.heads, PAST, c.hd)
    inputs = [ids, past_k, past_v]
    user_inputs = ["input_ids", "past_k", "past_v"]
    lean_inputs = lean_inputs_of(model) if lean_export else {}
    real = not lean_inputs
    outputs = []
    if real:
        with torch.no_grad():
            outputs = model(*inputs)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=out)
    random_bytes = 0
    try:
        tmp_path = os.path.join(tmp, name + ".onnx")
        with torch.no_grad(), (no_lean_clones() if lean_export else contextlib.nullcontext()):
            torch.onnx.export(model, tuple(inputs) + tuple(lean_inputs.values()), tmp_path, opset_version=17,
                              input_names=user_inputs + list(lean_inputs),
                              output_names=["logits", "present_k", "present_v"], do_constant_folding=True)
        if lean_export:
            path, stored, random_bytes, m = finish_lean(tmp_path, out, name, dtype, lean_inputs)
        else:
            del model
            path, stored, m = finish(tmp, tmp_path, out, name, external, dtype)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    data = os.path.join(out, name, "test_data_set_0")
    if os.path.isdir(data):
        shutil.rmtree(data)
    os.makedirs(data)
    np_dtype = np.float16 if dtype == "fp16" else np.float32
    for i, t in enumerate(inputs):
        a = t.numpy()
        if a.dtype == np.float32:
            a = a.astype(np_dtype)
        with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
    for i, t in enumerate(outputs):
        a = np.ascontiguousarray(t.numpy()).astype(np_dtype)
        with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    print("%s: %s, d %d, %d heads of %d, FFN %d, vocab %d, %d layers; %.0f M parameters, %s%s" % (
        path, c.name, c.d, c.heads, c.hd, c.ffn, c.vocab, c.layers, params / 1e6, dtype,
        ", %.2f GB in %s.onnx.data" % (stored / 1e9, name) if external else ""))
    if lean_export:
        print("  lean: %.2f GB of weights from a repeated random pool, written straight to the data file%s" % (
            random_bytes / 1e9, "" if real else "; no reference outputs in the test data"))
    print("  nodes: %s" % census(m))
    print("  projections: %s" % linear_forms(m))


USAGE = ("usage: llm.py OUT_DIR [--models gptj,llama] [--layers N] [--dtype fp32|fp16] "
         "[--external-data] [--lean] [--width D] [--vocab V] [--seed N]")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(USAGE)
    out = args.pop(0)
    models, layers, dtype, external, width, vocab, seed = ["gptj", "llama"], 2, "fp32", False, D_REAL, 0, 0
    lean_wanted = False
    while args:
        opt = args.pop(0)
        if opt == "--external-data":
            external = True
            continue
        if opt == "--lean":
            lean_wanted = True
            continue
        if not args:
            sys.exit(USAGE)
        val = args.pop(0)
        if opt == "--models":
            models = val.split(",")
            bad = [n for n in models if n not in ("gptj", "llama")]
            if bad:
                sys.exit("llm.py: unknown model %s (known: gptj, llama)" % bad[0])
        elif opt == "--layers":
            layers = int(val)
        elif opt == "--dtype":
            if val not in ("fp32", "fp16"):
                sys.exit("llm.py: --dtype is fp32 or fp16, not %s" % val)
            dtype = val
        elif opt == "--width":
            width = int(val)
        elif opt == "--vocab":
            vocab = int(val)
        elif opt == "--seed":
            seed = int(val)
        else:
            sys.exit(USAGE)
    if layers < 1 or width < 64 or width % 64:
        sys.exit("llm.py: --layers must be at least 1 and --width a multiple of 64")
    torch.manual_seed(seed)
    os.makedirs(out, exist_ok=True)
    for n in models:
        c = (gptj_shape if n == "gptj" else llama_shape)(layers, width, vocab)
        export(out, c, dtype, external, lean_wanted)


if __name__ == "__main__":
    main()
