# moe_frag.py: how far PyTorch's caching allocator reserves past what a
# Megatron-style MoE pipeline stage allocates when the shapes change from
# micro-batch to micro-batch (issue 19: the Megatron-SWIFT full-recompute
# rows, sim/calib_swift_moe_test.go, read nvidia-smi and miss 11-12 GiB).
#
# One GPU stands for one rank of moe.sh's first stage (Qwen1.5-MoE-A2.7B,
# pp 2 with 13 of 24 layers, ep 4: 15 of 60 experts a rank, top-4, dim
# 2048, expert hidden 1408, one shared expert of 5632 with a sigmoid
# gate, 16 heads of 128), every layer under full recompute (reentrant
# checkpoint of one layer, Megatron's CheckpointFunction), micro-batch 1,
# 4 micro-batches a step. The expert-parallel all-to-all is replaced by
# its effect on shapes: the rank receives the copies its 15 experts get
# from the 4 ranks' tokens (here: its own routing, 4 times). Parameters
# are bf16 with bf16 grads (Megatron's fp32 main grads and the optimizer
# live outside the step's churn: --states-gib of one block stands for
# them, so the cap below presses as on an 80 GB card).
#
#   --shapes fixed    8192 tokens, every expert exactly its share (memsh's replay)
#   --shapes routed   8192 tokens, the router's own counts per layer and micro-batch
#   --shapes packed   as routed, and each micro-batch of --min-len..8192 tokens
#                     (ms-swift --packing: rows filled up to max_length)
#
# Output: one JSON line per step (allocated / reserved peaks, segments,
# alloc retries), then a summary line. Run each mode in its own process
# (PYTORCH_CUDA_ALLOC_CONF is read once):
#   python3 moe_frag.py --shapes fixed --steps 20
#   python3 moe_frag.py --shapes packed --steps 20
#   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 moe_frag.py --shapes packed --steps 20
# --device cpu --scale 0.05 --steps 2 is a smoke test (no allocator figures).
import argparse
import json
import os
import random
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

p = argparse.ArgumentParser()
p.add_argument("--shapes", choices=["fixed", "routed", "packed"], default="packed")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--micro", type=int, default=4)
p.add_argument("--layers", type=int, default=13)
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--min-len", type=int, default=6144)
p.add_argument("--ep", type=int, default=4)
p.add_argument("--states-gib", type=float, default=36.5, help="one block for the model states (memsh's stage-0 figure)")
p.add_argument("--cap-gib", type=float, default=74.0, help="the allocator's limit: 79.25 GiB of an 80 GB card less ~5.4 GiB of NCCL and context")
p.add_argument("--scale", type=float, default=1.0, help="shrinks widths and tokens (smoke tests)")
p.add_argument("--device", default="cuda")
p.add_argument("--seed", type=int, default=19)
a = p.parse_args()

dev = torch.device(a.device)
cuda = dev.type == "cuda"
dt = torch.bfloat16
S = lambda n: max(16, int(n * a.scale) // 16 * 16)  # noqa: E731
D, H, E, K, EH, SH = S(2048), 16, 60, 4, S(1408), S(5632)
HD = D // H
LOCAL = E // a.ep
SEQ, MINLEN = S(a.seq), S(a.min_len)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)


def rms(x, w):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * w


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        w = lambda *s: torch.nn.Parameter(torch.randn(*s, device=dev, dtype=dt) * 0.02)  # noqa: E731
        self.n1, self.n2 = torch.nn.Parameter(torch.ones(D, device=dev, dtype=dt)), torch.nn.Parameter(torch.ones(D, device=dev, dtype=dt))
        self.qkv, self.o = w(3 * D, D), w(D, D)
        self.router = w(E, D)
        self.fc1 = torch.nn.ParameterList([w(2 * EH, D) for _ in range(LOCAL)])
        self.fc2 = torch.nn.ParameterList([w(D, EH) for _ in range(LOCAL)])
        self.s1, self.s2, self.sg = w(2 * SH, D), w(D, SH), w(1, D)

    def forward(self, x):
        t = x.shape[0]
        h = rms(x, self.n1)
        q, k, v = F.linear(h, self.qkv).view(t, 3, H, HD).permute(1, 2, 0, 3).unbind(0)
        att = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=True)
        x = x + F.linear(att.squeeze(0).transpose(0, 1).reshape(t, D), self.o)
        h = rms(x, self.n2)
        probs = torch.softmax(F.linear(h, self.router).float(), -1)
        topw, topi = probs.topk(K, -1)
        # Copies routed to this rank's experts (0..LOCAL-1), as the 4 ranks
        # would send them: this rank's own, ep times.
        flat = topi.reshape(-1)
        if a.shapes == "fixed":
            counts = [(t * K) // E + (1 if e < (t * K) % E else 0) for e in range(LOCAL)]
            rows = torch.cat([torch.arange(c, device=dev) % t for c in counts])
            wts = torch.full((rows.numel(),), 1.0 / K, device=dev)
        else:
            mine = (flat < LOCAL).nonzero().squeeze(1)
            order = torch.argsort(flat[mine], stable=True)
            sel = mine[order]
            counts = torch.bincount(flat[sel], minlength=LOCAL).tolist()  # the dispatcher's host sync
            rows, wts = sel // K, topw.reshape(-1)[sel]
        # Each expert's rows from the ep ranks, kept together per expert.
        rows = torch.cat([r.repeat(a.ep) for r in rows.split(counts)])
        wts = torch.cat([w.repeat(a.ep) for w in wts.split(counts)])
        counts = [c * a.ep for c in counts]
        recv = h.index_select(0, rows)  # the permuted, received rows
        outs = []
        for e, part in enumerate(recv.split(counts)):
            g, u = F.linear(part, self.fc1[e]).chunk(2, -1)
            outs.append(F.linear(F.silu(g) * u, self.fc2[e]))
        y = torch.cat(outs) * wts.to(dt).unsqueeze(1)
        moe = torch.zeros_like(h).index_add_(0, rows, y) / a.ep
        g, u = F.linear(h, self.s1).chunk(2, -1)
        shared = F.linear(F.silu(g) * u, self.s2) * torch.sigmoid(F.linear(h, self.sg))
        return x + moe + shared


layers = torch.nn.ModuleList([Layer() for _ in range(a.layers)])
states = None
if cuda:
    torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap_gib * 2**30 / torch.cuda.get_device_properties(dev).total_memory))
    have = sum(q.numel() * q.element_size() * 2 for q in layers.parameters())  # weights + grads
    states = torch.empty(max(0, int(a.states_gib * 2**30) - have), dtype=torch.uint8, device=dev)
G = lambda b: round(b / 2**30, 3)  # noqa: E731
log = []
t0 = time.time()
for step in range(1, a.steps + 1):
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    lens = []
    for _ in range(a.micro):
        t = SEQ if a.shapes != "packed" else rng.randint(MINLEN, SEQ)
        lens.append(t)
        x = torch.randn(t, D, device=dev, dtype=dt, requires_grad=True)
        for lay in layers:
            x = checkpoint(lay, x, use_reentrant=True)
        (x.float().square().mean()).backward()
        del x
    for q in layers.parameters():  # the optimizer step reads the grads; kept, as Megatron's buffer keeps them
        if q.grad is not None:
            q.grad.zero_()
    rec = {"mode": a.shapes, "step": step, "lens": lens, "wall_s": round(time.time() - t0, 2)}
    if cuda:
        st = torch.cuda.memory_stats()
        rec.update(max_allocated_gib=G(torch.cuda.max_memory_allocated()), max_reserved_gib=G(torch.cuda.max_memory_reserved()),
                   reserved_gib=G(torch.cuda.memory_reserved()), segments=st.get("segment.all.current", 0),
                   alloc_retries=st.get("num_alloc_retries", 0))
    log.append(rec)
    print(json.dumps(rec), flush=True)
summary = {"summary": a.shapes, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "args": vars(a), "torch": torch.__version__}
if cuda:
    summary.update(device=torch.cuda.get_device_name(dev), max_allocated_gib=max(r["max_allocated_gib"] for r in log),
                   max_reserved_gib=max(r["max_reserved_gib"] for r in log),
                   excess_gib=round(max(r["max_reserved_gib"] for r in log) - max(r["max_allocated_gib"] for r in log), 3))
print(json.dumps(summary), flush=True)
