#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Exports the example PyTorch models to ONNX (opset 17) for pim-extract.

    export.py OUT_DIR [--seed N] [--models NAME,...] [--external-data]

Writes, for each model NAME, OUT_DIR/NAME.onnx and OUT_DIR/NAME/test_data_set_0/ with
input_K.pb and output_K.pb (serialized TensorProto, the layout of ONNX's backend tests): the
inputs the model was run on and PyTorch's outputs for them, so that a model library built by
pim-extract can be checked against PyTorch (tests/compiler/onnx-run).

Models (by default the first four: small widths, so that their weights stay constants of the
library):
  gpt2-prefill   GPT-2-style decoder (token and position embeddings, 2 blocks of LayerNorm,
                 causal multi-head attention, tanh-GELU MLP; final LayerNorm, LM head) over a
                 prompt of 128 tokens; returns the logits and every layer's K/V cache
  gpt2-decode    the same weights, one token at position 128 with the 128-token K/V cache
                 as inputs; returns the logits and the grown cache
  llama-block    a LLaMA-style block: RMSNorm, rotary embeddings, causal attention, SwiGLU
  cnn            a small CNN: Conv/BatchNorm/ReLU, MaxPool, grouped Conv, AveragePool,
                 Flatten, exact (erf) GELU, Linear
  gpt2-small-prefill, gpt2-small-decode
                 the same decoder at GPT-2 small's size: 12 blocks, d 768, 12 heads, vocab
                 50257, 1024 positions, LM head tied to the token embedding (124 M
                 parameters, random weights; about 650 MB each: extract them with
                 pim-extract --weights zero)

--external-data writes each model's initializers to OUT_DIR/NAME.onnx.data beside it (ONNX
external data, as models over protobuf's 2 GB limit must be saved).
Needs python3-torch (1.13, CPU) and python3-onnx from Debian.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import onnx
from onnx import numpy_helper

VOCAB, D, HEADS, LAYERS, SEQ = 256, 64, 4, 2, 128


class Config:
    """The decoder's sizes: the small example's by default."""

    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, layers=LAYERS, positions=2 * SEQ, tied=False):
        self.vocab, self.d, self.heads, self.layers = vocab, d, heads, layers
        self.positions, self.tied = positions, tied


# GPT-2 small (Radford et al. 2019; the 124 M-parameter checkpoint's sizes).
GPT2_SMALL = Config(vocab=50257, d=768, heads=12, layers=12, positions=1024, tied=True)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.d, self.heads = c.d, c.heads
        self.qkv = nn.Linear(c.d, 3 * c.d)
        self.proj = nn.Linear(c.d, c.d)

    def forward(self, x, past_k=None, past_v=None):
        b, t, _ = x.shape
        d, heads = self.d, self.heads
        q, k, v = self.qkv(x).split(d, dim=2)
        hd = d // heads
        q = q.view(b, t, heads, hd).transpose(1, 2)
        k = k.view(b, t, heads, hd).transpose(1, 2)
        v = v.view(b, t, heads, hd).transpose(1, 2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        if t > 1:
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y), k, v


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.d)
        self.attn = Attention(c)
        self.ln_2 = nn.LayerNorm(c.d)
        self.fc = nn.Linear(c.d, 4 * c.d)
        self.fc_out = nn.Linear(4 * c.d, c.d)

    def forward(self, x, past_k=None, past_v=None):
        a, k, v = self.attn(self.ln_1(x), past_k, past_v)
        x = x + a
        x = x + self.fc_out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class GPT2(nn.Module):
    def __init__(self, c=Config()):
        super().__init__()
        self.wte = nn.Embedding(c.vocab, c.d)
        self.wpe = nn.Embedding(c.positions, c.d)
        self.h = nn.ModuleList([Block(c) for _ in range(c.layers)])
        self.ln_f = nn.LayerNorm(c.d)
        self.lm_head = nn.Linear(c.d, c.vocab, bias=False)
        if c.tied:
            self.lm_head.weight = self.wte.weight

    def run(self, ids, start, past=None):
        t = ids.shape[1]
        pos = torch.arange(start, start + t, dtype=torch.long).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        ks, vs = [], []
        for i, blk in enumerate(self.h):
            pk = past[0][i] if past is not None else None
            pv = past[1][i] if past is not None else None
            x, k, v = blk(x, pk, pv)
            ks.append(k)
            vs.append(v)
        return self.lm_head(self.ln_f(x)), torch.stack(ks), torch.stack(vs)


class Prefill(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids):
        return self.gpt.run(ids, 0)


class Decode(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids, past_k, past_v):
        return self.gpt.run(ids, SEQ, (past_k, past_v))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, t=SEQ):
        super().__init__()
        hd = D // HEADS
        self.norm1 = RMSNorm(D)
        self.wq = nn.Linear(D, D, bias=False)
        self.wk = nn.Linear(D, D, bias=False)
        self.wv = nn.Linear(D, D, bias=False)
        self.wo = nn.Linear(D, D, bias=False)
        self.norm2 = RMSNorm(D)
        self.w1 = nn.Linear(D, 3 * D, bias=False)
        self.w3 = nn.Linear(D, 3 * D, bias=False)
        self.w2 = nn.Linear(3 * D, D, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(t).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.full((t, t), float("-inf")).triu(1))

    def forward(self, x):
        b, t, _ = x.shape
        hd = D // HEADS
        h = self.norm1(x)
        q = self.wq(h).view(b, t, HEADS, hd).transpose(1, 2)
        k = self.wk(h).view(b, t, HEADS, hd).transpose(1, 2)
        v = self.wv(h).view(b, t, HEADS, hd).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + self.mask
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.wo(y)
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1, groups=2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(F.gelu(torch.flatten(x, 1)))  # exact (erf) GELU


def save(out, name, model, inputs, input_names, output_names, external=False):
    path = os.path.join(out, name + ".onnx")
    model.eval()
    with torch.no_grad():
        outputs = model(*inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        torch.onnx.export(model, tuple(inputs), path, opset_version=17, input_names=input_names,
                          output_names=output_names, do_constant_folding=True)
    if external:
        data = name + ".onnx.data"
        if os.path.exists(os.path.join(out, data)):
            os.unlink(os.path.join(out, data))  # onnx appends to an existing file
        onnx.save_model(onnx.load(path), path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data, size_threshold=1024)
    data = os.path.join(out, name, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for i, t in enumerate(inputs):
        with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy()).SerializeToString())
    for i, t in enumerate(outputs):
        with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(np.ascontiguousarray(t.numpy())).SerializeToString())
    print("%s: %d inputs, %d outputs" % (path, len(inputs), len(outputs)))


def save_gpt2(out, prefix, gpt, vocab, wanted, external):
    """PREFIX-prefill (128 tokens) and PREFIX-decode (one token, the 128-token K/V cache)."""
    ids = torch.randint(0, vocab, (1, SEQ))
    if prefix + "-prefill" in wanted:
        save(out, prefix + "-prefill", Prefill(gpt), [ids], ["input_ids"],
             ["logits", "present_k", "present_v"], external)
    if prefix + "-decode" in wanted:
        with torch.no_grad():
            _, pk, pv = gpt.run(ids, 0)
        nxt = torch.randint(0, vocab, (1, 1))
        save(out, prefix + "-decode", Decode(gpt), [nxt, pk, pv], ["input_ids", "past_k", "past_v"],
             ["logits", "present_k", "present_v"], external)


MODELS = ["gpt2-prefill", "gpt2-decode", "llama-block", "cnn"]
LARGE = ["gpt2-small-prefill", "gpt2-small-decode"]
USAGE = "usage: export.py OUT_DIR [--seed N] [--models NAME,...] [--external-data]"


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(USAGE)
    out, seed, wanted, external = args.pop(0), 0, list(MODELS), False
    while args:
        opt = args.pop(0)
        if opt == "--external-data":
            external = True
        elif opt in ("--seed", "--models") and args:
            val = args.pop(0)
            if opt == "--seed":
                seed = int(val)
            else:
                wanted = val.split(",")
                unknown = [n for n in wanted if n not in MODELS + LARGE]
                if unknown:
                    sys.exit("export.py: unknown model %s (known: %s)" % (unknown[0], ", ".join(MODELS + LARGE)))
        else:
            sys.exit(USAGE)
    torch.manual_seed(seed)
    os.makedirs(out, exist_ok=True)

    save_gpt2(out, "gpt2", GPT2().eval(), VOCAB, wanted, external)
    if "llama-block" in wanted:
        save(out, "llama-block", LlamaBlock(), [torch.randn(1, SEQ, D)], ["x"], ["y"], external)
    if "cnn" in wanted:
        cnn = CNN()
        with torch.no_grad():  # non-trivial BatchNorm statistics
            cnn.bn1.running_mean.uniform_(-0.5, 0.5)
            cnn.bn1.running_var.uniform_(0.5, 2.0)
        save(out, "cnn", cnn, [torch.randn(1, 3, 16, 16)], ["image"], ["logits"], external)
    if any(n in wanted for n in LARGE):
        save_gpt2(out, "gpt2-small", GPT2(GPT2_SMALL).eval(), GPT2_SMALL.vocab, wanted, external)


if __name__ == "__main__":
    main()
