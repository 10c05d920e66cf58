"""Live bytes per rank through one steady training step of a tiny torchtitan Llama under real FSDP2, and FSDP2 x
TP, on the CPU: the figures sim/fsdp_live_test.go holds memsh's peak allocated memory against (issues 28/21).

    /work/venv-t/bin/python tools/oracle/fsdp_live.py --out sim/testdata/fsdp_live.jsonl   # torch 2.15.0, CPU

The model is torchtitan's Llama 3 (torchtitan/models/llama3/model/model.py, copied below in short: wq/wk/wv/wo
without bias, rotary embedding through view_as_complex, repeat_kv then causal SDPA, w2(silu(w1(x)) * w3(x)),
RMSNorm, an untied output layer; the loss is cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))),
parallelized as torchtitan's parallelize_llama does: with tp, parallelize_module with its plan (tok_embeddings
RowwiseParallel to Shard(1), every norm SequenceParallel, PrepareModuleInput before attention and the MLP,
wq/wk/wv/w1/w3 ColwiseParallel, wo/w2 RowwiseParallel to Shard(1), output ColwiseParallel to Shard(-1) and
the loss and its backward under loss_parallel()); full activation checkpointing wraps each block in
checkpoint_wrapper (non-reentrant); then fully_shard on each block and the root over the dp mesh with
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) and AdamW (foreach) over the fp32 shards.
reshard_after_forward is set on every block alike (torchtitan at 9dec370 keeps its last block gathered; memsh
has no such exception, so the harness does not make one); the root keeps its parameters gathered after the forward
(see build).

One process stands for every rank: the fake process group (torch.testing._internal.distributed.fake_pg) runs no
collective but returns tensors of their real shapes, and FSDP2 allocates its all-gather and reduce-scatter
buffers itself, so the live bytes are one rank's.

Tracking: a TorchDispatchMode below autograd sees every aten op of the step (forward, backward, recompute,
optimizer) and records each new storage an op returns, a DTensor's through its local tensor, with the storage's
nbytes (what the op asked for: the CPU has no caching allocator, no 512-byte rounding); a storage is counted
free once torch's StorageWeakRef expires (polled before every op and at the end of the step). Temporaries inside
one CPU kernel are not seen. What is live at the peak is listed by kind: param (an FSDP2 sharded parameter),
grad (its sharded gradient), optimizer (AdamW's state), batch, buffer (freqs_cis), and for everything made in the
step the phase (forward, backward, recompute, optimizer) and the op that made it. The first step runs untracked
(AdamW makes its state there), then zero_grad(set_to_none=True), then the tracked step, as memsh replays the
steady step after the first.
"""
import argparse
import contextlib
import gc
import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed._tensor import DTensor, Replicate, Shard
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, loss_parallel, parallelize_module)
from torch.multiprocessing.reductions import StorageWeakRef
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# The model: dim, layers, heads, kv heads, FFN, vocabulary. Every sharded dimension divides by 4 ranks.
MODEL = dict(dim=256, layers=2, heads=8, kv_heads=4, ffn=512, vocab=1024)

# name, dp, tp, reshard_after_forward, checkpoint ("none" or "full"), mixed precision
CASES = [
    ("fsdp4", 4, 1, True, "none", True),
    ("fsdp4_noreshard", 4, 1, False, "none", True),
    ("fsdp4_full", 4, 1, True, "full", True),
    ("fsdp4_fp32", 4, 1, True, "none", False),
    ("fsdp2_tp2", 2, 2, True, "none", True),
    ("fsdp2_tp2_full", 2, 2, True, "full", True),
]


def precompute_freqs_cis(dim, end, theta=500000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(
        bs, slen, n_kv_heads * n_rep, head_dim)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.n_rep, self.head_dim = heads // kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, freqs_cis):
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bs, seqlen, -1, self.head_dim)  # -1: the local heads under tp
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = repeat_kv(xk, self.n_rep), repeat_kv(xv, self.n_rep)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                             is_causal=True)
        out = out.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.attention = Attention(m["dim"], m["heads"], m["kv_heads"])
        self.feed_forward = FeedForward(m["dim"], m["ffn"])
        self.attention_norm = nn.RMSNorm(m["dim"], eps=1e-5)
        self.ffn_norm = nn.RMSNorm(m["dim"], eps=1e-5)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, m, seq):
        super().__init__()
        self.tok_embeddings = nn.Embedding(m["vocab"], m["dim"])
        self.register_buffer("freqs_cis", precompute_freqs_cis(m["dim"] // m["heads"], seq), persistent=False)
        self.layers = nn.ModuleDict({str(i): Block(m) for i in range(m["layers"])})
        self.norm = nn.RMSNorm(m["dim"], eps=1e-5)
        self.output = nn.Linear(m["dim"], m["vocab"], bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


def apply_tp(model, tp_mesh):
    """torchtitan's apply_tp (parallelize_llama.py), loss_parallel on, float8 and async TP off."""
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
    })
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })


def build(case, seq, device):
    name, dp, tp, reshard, ckpt, mixed = case
    world = dp * tp
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    mesh = init_device_mesh(device, (dp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = Transformer(MODEL, seq)
    if tp > 1:
        apply_tp(model, mesh["tp"])
    if ckpt == "full":
        for k, block in list(model.layers.items()):
            model.layers[k] = checkpoint_wrapper(block, preserve_rng_state=False)
    kw = {"mesh": mesh["dp"]}
    if mixed:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers.values():
        fully_shard(block, reshard_after_forward=reshard, **kw)
    # The root: torch 2.4 to 2.6 (torchtitan's, which passes reshard_after_forward=True) never resharded it
    # after the forward (FSDPState._lazy_init: "for the root, do not reshard after forward"); torch 2.15 does so
    # only when the argument is left to its default, None, as here. False keeps it gathered all the same.
    fully_shard(model, reshard_after_forward=None if reshard else False, **kw)
    return model, tp > 1


def local(t):
    """The plain tensors holding t's data (a DTensor's local shard)."""
    if isinstance(t, DTensor):
        return local(t._local_tensor)
    if type(t) is not torch.Tensor and hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return [x for n in names for x in local(getattr(t, n))]
    return [t]


# FSDP2's own buffers, by the function that allocates them (torch 2.15 _fsdp_collectives.py).
FSDP_BUFFERS = {"foreach_all_gather": "all-gather output", "foreach_reduce": "reduce-scatter"}


def fsdp_buffer(phase):
    """Which FSDP2 buffer an empty() in phase allocates, by its caller; None if not FSDP2's. foreach_reduce
    allocates the reduce-scatter input (the unsharded gradients in reduce_dtype) and its output (the new
    sharded gradients); they are told apart by size at the peak (the input is world times the output)."""
    f = sys._getframe(2)
    while f is not None:
        name = FSDP_BUFFERS.get(f.f_code.co_name)
        if name and "fsdp" in f.f_code.co_filename:
            return "fsdp " + name
        f = f.f_back
    return None


def storages_of(x):
    out = []
    for t in tree_flatten(x)[0]:
        if isinstance(t, torch.Tensor):
            out.extend(local(t))
    return out


class Tracker(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live = {}  # storage _cdata -> [weakref, bytes counted, kind]
        self.now = self.peak = 0
        self.at_peak = {}
        self.phase = "setup"
        self.phase_peak = {}  # the most live bytes at once in each phase

    def add(self, t, kind, empty=False):
        """Counts t's storage from now on; empty: also one of no bytes yet (FSDP2 resizes its unsharded
        parameters' storages to 0 after each use and back before the next, storage.resize_, which no aten op
        dispatches)."""
        s = t.untyped_storage()
        key = s._cdata
        if key in self.live or (s.nbytes() == 0 and not empty):
            return
        self.live[key] = [StorageWeakRef(s), s.nbytes(), kind]
        self.grow(s.nbytes())

    def grow(self, n):
        self.now += n
        # the loss's forward is in memsh's forward; a checkpoint's recompute in the backward
        phase = {"loss": "forward", "recompute": "backward"}.get(self.phase, self.phase)
        self.phase_peak[phase] = max(self.phase_peak.get(phase, 0), self.now)
        if self.now > self.peak:
            self.peak = self.now
            self.at_peak = None  # taken at the next collect: the same op may add more

    def collect(self):
        """Frees and resizes since the last op: frees and shrinks first, then growth (FSDP2 reshards one unit
        before it unshards the next)."""
        if self.at_peak is None:
            self.at_peak = self.breakdown()
        grown = []
        for key, rec in list(self.live.items()):
            if rec[0].expired():
                del self.live[key]
                self.now -= rec[1]
                continue
            n = torch.UntypedStorage._new_with_weak_ptr(rec[0].cdata).nbytes()
            if n < rec[1]:
                self.now -= rec[1] - n
            elif n > rec[1]:
                grown.append(n - rec[1])
            rec[1] = n
        for n in grown:
            self.grow(n)
        if self.at_peak is None:
            self.at_peak = self.breakdown()

    def breakdown(self):
        out = {}
        for _, n, kind in self.live.values():
            if n == 0:
                continue
            out[kind] = out.get(kind, 0) + n
        return out

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.collect()
        out = func(*args, **(kwargs or {}))
        op = func.overloadpacket.__name__
        phase = self.phase
        if phase == "backward" and torch.is_grad_enabled():
            phase = "recompute"
        kind = phase + " " + op
        if op == "empty":
            kind = fsdp_buffer(phase) or kind
        for t in storages_of(out):
            self.add(t, kind)
        return out


def measure(case, batch, seq, device="cpu"):
    model, tp = build(case, seq, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, MODEL["vocab"], (batch, seq), device=device)
    labels = torch.randint(0, MODEL["vocab"], (batch, seq), device=device)

    def phase(tr, name):
        if tr:
            tr.phase = name

    def fwd_bwd(tr):
        phase(tr, "forward")
        pred = model(ids)
        phase(tr, "loss")  # the forward's cross-entropy, outside every module
        with loss_parallel() if tp else contextlib.nullcontext():
            loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
            del pred
            phase(tr, "backward")
            with torch.no_grad():  # the loss's gradient, made here so it is not taken for a recompute
                seed = torch.ones_like(loss)
            loss.backward(seed)
        return loss.detach()

    fwd_bwd(None)
    opt.step()
    opt.zero_grad(set_to_none=True)
    gc.collect()

    tr = Tracker()
    for p in model.parameters():
        for t in local(p):
            tr.add(t, "param")
        for v in opt.state.get(p, {}).values():
            if isinstance(v, torch.Tensor):
                for t in local(v):
                    tr.add(t, "optimizer step" if t.dim() == 0 else "optimizer")
    for path, m in model.named_modules():  # FSDP2's unsharded parameters: resized to 0 between uses
        group = getattr(fully_shard.state(m), "_fsdp_param_group", None) if hasattr(m, "unshard") else None
        unit = path or "root"  # the unit's module
        for fp in getattr(group, "fsdp_params", []):
            for t in getattr(fp, "all_gather_outputs", []):
                tr.add(t, "unsharded param " + unit, empty=True)
            if hasattr(fp, "_unsharded_param"):
                for t in local(fp._unsharded_param):
                    tr.add(t, "unsharded param " + unit, empty=True)
    for b in model.buffers():
        tr.add(b, "buffer")
    tr.add(ids, "batch")
    tr.add(labels, "batch")
    setup = tr.now
    cuda = device.startswith("cuda")
    if cuda:  # the caching allocator's own figures of the same step (rounded blocks, CUDA's kernels)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        allocated_before = torch.cuda.memory_allocated()
    with tr:
        loss = fwd_bwd(tr)
        tr.phase = "optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        gc.collect()
        tr.collect()
    extra = {}
    if cuda:
        torch.cuda.synchronize()
        extra = {"cuda": {"allocated_before": allocated_before, "max_allocated": torch.cuda.max_memory_allocated(),
                          "allocated_after": torch.cuda.memory_allocated(), "gpu": torch.cuda.get_device_name()}}
    name, dp, tp_deg, reshard, ckpt, mixed = case
    return {**extra, "device": device,
        "name": name, "dp": dp, "tp": tp_deg, "reshard_after_forward": reshard, "checkpoint": ckpt,
        "mixed": mixed, "batch": batch, "seq": seq, "model": MODEL,
        "setup": setup, "peak": tr.peak, "phase_peak": tr.phase_peak, "at_peak": dict(sorted(tr.at_peak.items())), "end": tr.now,
        "torch": torch.__version__,
        "command": "python tools/oracle/fsdp_live.py --out sim/testdata/fsdp_live.jsonl",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="", help="comma-separated names (default: all)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--device", default="cpu", help="cpu (sim/testdata/fsdp_live.jsonl) or cuda: the same step through "
                    "the CUDA caching allocator on one GPU (fake process group), with its max_memory_allocated")
    a = ap.parse_args()
    torch.set_num_threads(1)
    want = set(a.cases.split(",")) if a.cases else None
    with open(a.out, "w") as f:
        for case in CASES:
            if want and case[0] not in want:
                continue
            rec = measure(case, a.batch, a.seq, a.device)
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            print(case[0], "setup", rec["setup"], "peak", rec["peak"], "end", rec["end"], rec.get("cuda", ""))


if __name__ == "__main__":
    main()
