#!/usr/bin/env python3
"""torch.compile's peaks on CUDA without graph breaks: the second compile run (prepared, then run as run 4 of sim/testdata/cuda_h200).

Run 1 (sim/testdata/cuda_h200/extra.jsonl part "compile") compiled ../shared/oracle/measure.py's stacks, whose
sdpa() reads y.grad_fn: a Dynamo graph break ("Tensor with grad_fn()"), so every block ran as four graphs around
an eager SDPA call. memsh models a compiled block as one graph (torchtitan's and torchtune's per-block compile).
This script runs the same two stacks, self-contained (the blocks as measure.py builds them, the same buffers,
inputs, gout and AdamW), with an SDPA call Dynamo traces, in three modes:

  whole      torch.compile(stack, fullgraph=True): one graph for the four blocks
  per_block  each block torch.compile'd on its own (torchtitan's apply_compile, torchtune's compile_model)
  broken     the run-1 structure (sdpa() reads y.grad_fn): reproduces run 1's figures as a check

and prints one JSON line per figure (step 3 of 3, steady state): at_start, after_forward, peak_forward,
peak_backward (max_memory_allocated through the backward), max_memory_reserved; one line per mode with
Dynamo's graph and graph-break counts; one line per compiled backward graph with the order of its matmuls,
its allocations and frees and Inductor's buffer reuses, read from the output code Inductor writes (the code
files are copied under $OUT/inductor_code/).

It settles: (1) whether memsh's whole-block model (tests: sim/calib_compile_cuda_test.go) holds without the
graph break: memsh predicts per_block and whole to the byte up to the named terms there, with the
gpt2 forward peak 16 MiB lower than run 1's (the break's held input gone); (2) the order of a compiled
linear's two gradient matmuls on CUDA (core's weightGradFirst: weight gradient first, saved input freed,
then the input gradient), with and without a bias (mm vs addmm), and which buffers Inductor reuses in place
(core's gradInPlace), read from the code; (3) that run 1's numbers reproduce (mode broken).

    OUT=dir python3 tools/oracle/cuda_compile_probe.py      # one H200, < 60 s; torch 2.11 as run 1
"""
import gc
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

OUT = os.environ.get("OUT") or tempfile.mkdtemp()
CACHE = tempfile.mkdtemp(prefix="inductor_probe_")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE  # before torch: the output code lands here
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

T0 = time.time()
DEADLINE_S = float(os.environ.get("DEADLINE_S", "55"))
LINES = open(os.path.join(OUT, "compile_probe.jsonl"), "a")


def emit(d):
    d["t_s"] = round(time.time() - T0, 3)
    s = json.dumps(d)
    print(s, flush=True)
    LINES.write(s + "\n")
    LINES.flush()


class Sdpa:
    """measure.py's sdpa(): with broken=True it reads y.grad_fn as run 1 did (a graph break)."""
    broken = False


def sdpa(q, k, v, p):
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    if Sdpa.broken and y.grad_fn is not None:
        Sdpa.node = y.grad_fn.name()
    return y


def native_dropout(x, p):
    return torch.native_dropout(x, p, True)[0] if p > 0 else x


class GPT2Block(nn.Module):  # measure.py's GPT2Block, attn="sdpa", drop="native"
    def __init__(self, h, a, s_max, p=0.1):
        super().__init__()
        self.h, self.a, self.d, self.p = h, a, h // a, p
        self.ln1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, 4 * h)
        self.c_fc2 = nn.Linear(4 * h, h)
        self.register_buffer("causal", torch.triu(torch.ones(s_max, s_max, dtype=torch.bool), 1)[None, None])

    def attn(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=2)
        q, k, v = (t.view(b, s, self.a, self.d).transpose(1, 2) for t in (q, k, v))
        y = sdpa(q, k, v, self.p if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(b, s, h)
        return native_dropout(self.c_proj(y), self.p)

    def mlp(self, x):
        return native_dropout(self.c_fc2(F.gelu(self.c_fc(x), approximate="tanh")), self.p)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        xf = x.to(torch.float32)
        var = xf.pow(2).mean(-1, keepdim=True)
        xf = xf * torch.rsqrt(var + self.eps)
        return self.weight * xf.to(dt)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):
    if n == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


class LlamaBlock(nn.Module):  # measure.py's LlamaBlock, attn="sdpa"
    def __init__(self, h, a, kv, ffn, s_max):
        super().__init__()
        self.a, self.kv, self.d = a, kv, h // a
        self.norm1, self.norm2 = RMSNorm(h), RMSNorm(h)
        self.wq = nn.Linear(h, a * self.d, bias=False)
        self.wk = nn.Linear(h, kv * self.d, bias=False)
        self.wv = nn.Linear(h, kv * self.d, bias=False)
        self.wo = nn.Linear(a * self.d, h, bias=False)
        self.w1 = nn.Linear(h, ffn, bias=False)
        self.w3 = nn.Linear(h, ffn, bias=False)
        self.w2 = nn.Linear(ffn, h, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.d, 2).float() / self.d))
        fr = torch.outer(torch.arange(s_max).float(), inv)
        emb = torch.cat((fr, fr), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("causal", torch.triu(torch.ones(s_max, s_max, dtype=torch.bool), 1)[None, None])

    def attn(self, x):
        b, s, h = x.shape
        q = self.wq(x).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv, self.d).transpose(1, 2)
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.a // self.kv), repeat_kv(v, self.a // self.kv)
        y = sdpa(q, k, v, 0.0)
        return self.wo(y.transpose(1, 2).contiguous().view(b, s, h))

    def mlp(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


CASES = {
    "llama": dict(kind="llama", layers=4, h=2048, a=32, kv=4, ffn=5632, s=2048, b=4),
    "gpt2": dict(kind="gpt2", layers=4, h=1024, a=16, s=1024, b=8),
}
# PROBE_DRY=1: a small CPU run that checks the script itself (no figure of it means anything)
DRY = os.environ.get("PROBE_DRY") == "1"
DEV = "cpu" if DRY else "cuda"
if DRY:
    CASES = {"llama": dict(kind="llama", layers=2, h=256, a=8, kv=2, ffn=688, s=256, b=2),
             "gpt2": dict(kind="gpt2", layers=2, h=256, a=4, s=256, b=2)}


def build(c):
    torch.manual_seed(0)
    with torch.device(DEV):
        if c["kind"] == "llama":
            blocks = [LlamaBlock(c["h"], c["a"], c["kv"], c["ffn"], c["s"]) for _ in range(c["layers"])]
        else:
            blocks = [GPT2Block(c["h"], c["a"], c["s"]) for _ in range(c["layers"])]
    m = nn.Sequential(*blocks).to(dtype=torch.bfloat16)
    m.train()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(c["b"], c["s"], c["h"], generator=g).to(torch.bfloat16).to(DEV).requires_grad_(True)
    return m, x


def inductor_code_files():
    return set(glob.glob(os.path.join(CACHE, "**", "*.py"), recursive=True))


CODE_EVENT = re.compile(r"^\s*(?:(buf\w+) = empty_strided_(?:cuda|cpu)\(\(([^)]*)\).*?torch\.(\w+)\)"
                        r"|(buf\w+) = reinterpret_tensor\((\w+),.*#\s*reuse"
                        r"|extern_kernels\.(\w+)\((.*)out=(\w+)\)"
                        r"|del (\w+))")
DT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "int64": 8, "bool": 1, "uint8": 1, "int32": 4}


def backward_events(path):
    """The order of a backward graph's allocations, matmuls, reuses and frees (its call())."""
    src = open(path).read()
    if "def call(" not in src or "tangents_" not in src:
        return None
    body = src[src.index("def call("):]
    ev = []
    for line in body.splitlines():
        m = CODE_EVENT.match(line)
        if not m:
            continue
        if m.group(1):
            n = 1
            for d in (x for x in m.group(2).split(",") if x.strip()):
                n *= int(d)
            ev.append(["alloc", m.group(1), n * DT_BYTES.get(m.group(3), 0)])
        elif m.group(4):
            ev.append(["reuse", m.group(4), m.group(5)])
        elif m.group(6):
            args = re.findall(r"reinterpret_tensor\((\w+)|\b(primals_\w+|tangents_\w+|buf\w+|view\w*|mm\w*|addmm\w*)\b",
                              m.group(7))
            ev.append([m.group(6), m.group(8), [a or b for a, b in args][:3]])
        elif m.group(9):
            ev.append(["del", m.group(9)])
    return ev


class NoCuda:
    """torch.cuda's counters as zeros on a dry run."""
    def __getattr__(self, name):
        return lambda *a, **k: 0


CUDA = NoCuda() if DRY else torch.cuda


def run(case, mode):
    c = CASES[case]
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    Sdpa.broken = mode == "broken"
    m, x = build(c)
    opt = torch.optim.AdamW(list(m.parameters()), lr=1e-4)
    if mode == "whole":
        f = torch.compile(m, fullgraph=True)
    elif mode == "per_block":
        for i in range(len(m)):
            m[i] = torch.compile(m[i], fullgraph=True)
        f = m
    else:
        f = torch.compile(m)
    gout = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(x.dtype).to(DEV)
    before = inductor_code_files()
    rec = None
    for step in range(1, 4):
        opt.zero_grad(set_to_none=True)
        x.grad = None
        gc.collect()
        CUDA.synchronize()
        CUDA.reset_peak_memory_stats()
        a0 = CUDA.memory_allocated()
        out = f(x)
        CUDA.synchronize()
        af, pf = CUDA.memory_allocated(), CUDA.max_memory_allocated()
        out.backward(gout)
        del out
        CUDA.synchronize()
        pb = CUDA.max_memory_allocated()
        opt.step()
        CUDA.synchronize()
        rec = dict(at_start=a0, after_forward=af, peak_forward=pf, peak_backward=pb,
                   max_memory_allocated=CUDA.max_memory_allocated(),
                   max_memory_reserved=CUDA.max_memory_reserved())
    for fig, v in rec.items():
        emit(dict(part="compile_probe", case=case, mode=mode, step=3, figure=fig, bytes=v))
    cnt = torch._dynamo.utils.counters
    emit(dict(part="compile_probe_graphs", case=case, mode=mode, unique_graphs=cnt["stats"].get("unique_graphs", 0),
              graph_breaks=sum(cnt["graph_break"].values()), torch=torch.__version__))
    dest = os.path.join(OUT, "inductor_code", case + "_" + mode)
    os.makedirs(dest, exist_ok=True)
    for k, path in enumerate(sorted(inductor_code_files() - before)):
        ev = backward_events(path)
        shutil.copy(path, os.path.join(dest, "%02d_%s" % (k, os.path.basename(path))))
        if ev:
            emit(dict(part="compile_probe_backward", case=case, mode=mode, file=os.path.basename(path), events=ev))
    del m, opt, f, x, gout
    gc.collect()
    CUDA.empty_cache()


def main():
    if not DRY and not torch.cuda.is_available():
        print("cuda_compile_probe.py: no CUDA device", file=sys.stderr)
        return 2
    emit(dict(part="start", device="cpu (dry run)" if DRY else torch.cuda.get_device_name(0), torch=torch.__version__))
    for case, mode in [("gpt2", "per_block"), ("llama", "per_block"), ("gpt2", "whole"), ("llama", "whole"),
                       ("gpt2", "broken"), ("llama", "broken")]:
        if time.time() - T0 > DEADLINE_S:
            emit(dict(part="skipped", case=case, mode=mode, reason="deadline"))
            continue
        try:
            run(case, mode)
        except Exception as e:  # one case's failure (a graph break under fullgraph=True) is a result too
            emit(dict(part="error", case=case, mode=mode, error="%s: %s" % (type(e).__name__, str(e)[:400])))
    emit(dict(part="end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
