"""What one op's backward really launches on a CUDA GPU, and how long it takes.

For each case an op runs on fresh inputs; torch.autograd.grad then takes the gradients of its inputs
(no .grad accumulation: the op's own backward only). Recorded per case: the kernels the forward and the
backward launch (torch.profiler: name, count, device time) and their times by CUDA events, the median of
--reps repetitions. This is the measurement behind memsh's backward pricing of adds (autograd's
AddBackward0 passes the gradient through), casts (ToCopyBackward0: one cast back), broadcasts (a
reduction), a tensor used twice (its gradients summed), masked_fill and softmax.

    python3 tools/oracle/cuda_bwd_kernels.py --out bwd.jsonl [--reps 20] [--deadline-s 60]
    python3 tools/oracle/cuda_bwd_kernels.py --out /tmp/smoke.jsonl --device cpu --small   # smoke test
    python3 tools/oracle/cuda_bwd_kernels.py --set broadcast --out bwd_broadcast.jsonl --deadline-s 60
    python3 tools/oracle/cuda_bwd_kernels.py --set lora --out bwd_lora.jsonl --deadline-s 90
    python3 tools/oracle/cuda_bwd_kernels.py --set moe --out bwd_moe.jsonl --deadline-s 60
"""
import argparse
import json
import statistics
import sys
import time

import torch

T0 = time.time()


def cases(dev, small):
    n, c = (64, 32) if small else (16384, 4096)
    b, h, s = (1, 2, 16) if small else (4, 32, 2048)
    bf, f32 = torch.bfloat16, torch.float32

    def t(shape, dt):
        return torch.randn(shape, device=dev, dtype=dt, requires_grad=True)

    mask = torch.ones(s, s, device=dev, dtype=torch.bool).triu(1)
    return [
        # name, inputs, op
        ("add_same_bf16", lambda: [t((n, c), bf), t((n, c), bf)], lambda a, b_: a + b_),
        ("add_broadcast_bf16", lambda: [t((n, c), bf), t((c,), bf)], lambda a, b_: a + b_),
        ("add_twice_bf16", lambda: [t((n, c), bf)], lambda a: a + a),
        ("mul_same_bf16", lambda: [t((n, c), bf), t((n, c), bf)], lambda a, b_: a * b_),
        ("cast_bf16_to_fp32", lambda: [t((n, c), bf)], lambda a: a.float()),
        ("cast_fp32_to_bf16", lambda: [t((n, c), f32)], lambda a: a.to(bf)),
        ("add_same_fp32", lambda: [t((n, c), f32), t((n, c), f32)], lambda a, b_: a + b_),
        ("masked_fill_bf16", lambda: [t((b, h, s, s), bf)], lambda a: a.masked_fill(mask, float("-inf"))),
        ("softmax_bf16", lambda: [t((b, h, s, s), bf)], lambda a: torch.softmax(a, -1)),
        ("softmax_bf16_to_fp32", lambda: [t((b, h, s, s), bf)], lambda a: torch.softmax(a, -1, dtype=f32)),
        ("softmax_fp32", lambda: [t((b, h, s, s), f32)], lambda a: torch.softmax(a, -1)),
        ("silu_bf16", lambda: [t((n, c), bf)], lambda a: torch.nn.functional.silu(a)),
    ]


def broadcast_cases(dev, small):
    """--set broadcast: binary ops on broadcast operands at Qwen3-0.6B's shapes (8 x 2,048 tokens, hidden
    1,024, 16 heads of 128), each alone and inside Hugging Face's RMSNorm and rotary embedding, whose
    forward and backward the profiled Qwen3-0.6B step runs on TensorIterator's generic elementwise_kernel."""
    b, s, h, d = (1, 16, 2, 8) if small else (8, 2048, 16, 128)
    n, c = b * s, h * d // 2
    bf, f32 = torch.bfloat16, torch.float32

    def t(shape, dt, grad=True):
        return torch.randn(shape, device=dev, dtype=dt, requires_grad=grad)

    def rmsnorm(x, w):  # LlamaRMSNorm / Qwen3RMSNorm.forward at transformers 5.17.0
        x32 = x.to(f32)
        var = x32.pow(2).mean(-1, keepdim=True)
        return w * (x32 * torch.rsqrt(var + 1e-6)).to(x.dtype)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    cos = torch.randn((b, 1, s, d), device=dev, dtype=bf)
    sin = torch.randn((b, 1, s, d), device=dev, dtype=bf)
    return [
        ("mul_rows_fp32", lambda: [t((n, c), f32), t((n, 1), f32)], lambda a, r: a * r),
        ("mul_weight_bf16", lambda: [t((c,), bf), t((n, c), bf)], lambda w, a: w * a),
        ("mul_heads_rows_fp32", lambda: [t((b, s, h, d), f32), t((b, s, h, 1), f32)], lambda a, r: a * r),
        ("mul_cos_bf16", lambda: [t((b, h, s, d), bf)], lambda q: q * cos),
        ("rmsnorm_bf16", lambda: [t((n, c), bf), t((c,), bf)], rmsnorm),
        ("rmsnorm_heads_bf16", lambda: [t((b, s, h, d), bf), t((d,), bf)], rmsnorm),
        ("rope_bf16", lambda: [t((b, h, s, d), bf)], lambda q: q * cos + rotate_half(q) * sin),
    ]


def lora_cases(dev, small):
    """--set lora: PEFT's LoRA branch at the profiled Llama-3.2-1B LoRA step's shapes (4 x 2,048 tokens,
    hidden 2,048, k/v 512, MLP 8,192, rank 16; sim/testdata/cuda_h200/hf_profile.jsonl), whole and
    GEMM by GEMM: lora.Linear.forward with fp32 adapters (peft 0.21: x.to(fp32), lora_B(lora_A(x)) *
    scaling in fp32, added to the bf16 base output with type promotion, the sum cast back) and with
    bf16 adapters (autocast_adapter_dtype=False); each adapter GEMM alone in fp32 (rank-16 shapes on
    cuBLAS's SIMT kernels, TF32 off) and bf16; the bf16 + fp32 add alone. What memsh prices the rank-16
    fp32 GEMMs and the promoted adds from (TestHFH200StepTime's LoRA row)."""
    n, r = (64, 4) if small else (8192, 16)
    dims = [(32, 32), (32, 8), (32, 64), (64, 32)] if small else [(2048, 2048), (2048, 512), (2048, 8192), (8192, 2048)]
    bf, f32 = torch.bfloat16, torch.float32
    F = torch.nn.functional

    def t(shape, dt):
        return torch.randn(shape, device=dev, dtype=dt, requires_grad=True)

    def branch(x, y, a, b_):  # peft/tuners/lora/layer.py Linear.forward, the adapter part
        xin = x.to(a.dtype)
        return (y + F.linear(F.linear(xin, a), b_) * 2.0).to(y.dtype)

    out = []
    for i, o in dims:
        for dt, tag in ((f32, "fp32"), (bf, "bf16")):
            out.append((f"lora_branch_{tag}_{i}x{o}",
                        lambda i=i, o=o, dt=dt: [t((n, i), bf), t((n, o), bf), t((r, i), dt), t((o, r), dt)], branch))
        for dt, tag in ((f32, "fp32"), (bf, "bf16")):
            out.append((f"lora_A_{tag}_{i}x{o}", lambda i=i, dt=dt: [t((n, i), dt), t((r, i), dt)], F.linear))
            out.append((f"lora_B_{tag}_{i}x{o}", lambda o=o, dt=dt: [t((n, r), dt), t((o, r), dt)], F.linear))
    for o in sorted({o for _, o in dims}):
        out.append((f"add_bf16_fp32_{o}", lambda o=o: [t((n, o), bf), t((n, o), f32)], lambda a, b_: a + b_))
    return out


def moe_cases(dev, small):
    """--set moe: transformers 5.17's grouped_mm experts (integrations/moe.py grouped_mm_experts_forward)
    at the small Qwen3-MoE's shapes (4 x 2,048 tokens, top-8: S = 65,536 routed rows; hidden 1,024, expert
    hidden 512): the sentinel masked_fill of [S, d] rows by an [S, 1] mask (out of place: ATen's clone, a
    Memcpy DtoD, then the masked_fill_ kernel; the kernels list times the two apart, the in-place fill
    being the second alone), and the gate's activation times up on gate_up's two chunks (strided views of
    one [S, 2h] output) against the same on contiguous tensors."""
    S, d, h = (64, 16, 8) if small else (65536, 1024, 512)
    bf = torch.bfloat16

    def t(shape, dt=bf):
        return torch.randn(shape, device=dev, dtype=dt, requires_grad=True)

    sentinel = torch.zeros(S, 1, device=dev, dtype=torch.bool)
    sentinel[-S // 64:] = True

    def gated(gu):  # _default_apply_gate
        gate, up = gu.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up

    return [
        ("masked_fill_rows_bf16", lambda: [t((S, d))], lambda a: a.masked_fill(sentinel, 0.0)),
        ("masked_fill_rows_wide_bf16", lambda: [t((S, 2 * h))], lambda a: a.masked_fill(sentinel, 0.0)),
        ("silu_mul_chunks_bf16", lambda: [t((S, 2 * h))], gated),
        ("silu_mul_contiguous_bf16", lambda: [t((S, h)), t((S, h))],
         lambda g, u: torch.nn.functional.silu(g) * u),
    ]


def kernels(prof):
    out = {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            k = out.setdefault(e.name[:160], [0, 0.0])
            k[0] += 1
            k[1] += e.time_range.elapsed_us() / 1e6
    return [dict(name=k, count=v[0], time_s=v[1]) for k, v in sorted(out.items(), key=lambda kv: -kv[1][1])]


def run(name, mk, op, dev, reps):
    from torch.profiler import profile, ProfilerActivity
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fwd, bwd = [], []
    for i in range(reps + 2):
        xs = mk()
        sync()
        if cuda:
            e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            e0.record()
        t0 = time.perf_counter()
        y = op(*xs)
        if cuda:
            e1.record()
        t1 = time.perf_counter()
        g = torch.ones_like(y)
        sync()
        if cuda:
            e1b = torch.cuda.Event(enable_timing=True)
            e1b.record()
        t1b = time.perf_counter()
        torch.autograd.grad(y, xs, g)
        if cuda:
            e2.record()
        sync()
        t2 = time.perf_counter()
        if i >= 2:  # two warm-ups
            if cuda:
                fwd.append(e0.elapsed_time(e1) / 1e3)
                bwd.append(e1b.elapsed_time(e2) / 1e3)
            else:
                fwd.append(t1 - t0)
                bwd.append(t2 - t1b)
        del xs, y, g
    xs = mk()
    with profile(activities=acts) as pf:
        y = op(*xs)
        sync()
    g = torch.ones_like(y)
    sync()
    with profile(activities=acts) as pb:
        torch.autograd.grad(y, xs, g)
        sync()
    return dict(case=name, shapes=[list(x.shape) for x in xs], dtypes=[str(x.dtype) for x in xs],
                out_dtype=str(y.dtype), out_bytes=y.numel() * y.element_size(),
                in_bytes=[x.numel() * x.element_size() for x in xs],
                forward_s=statistics.median(fwd), backward_s=statistics.median(bwd),
                forward_all_s=fwd, backward_all_s=bwd,
                forward_kernels=kernels(pf), backward_kernels=kernels(pb))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--deadline-s", type=float, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny shapes (a smoke test of the script)")
    ap.add_argument("--set", default="ops", choices=["ops", "broadcast", "lora", "moe"],
                    help="ops: the backward rules' cases (run 19); broadcast: broadcast binary ops, RMSNorm, rope; "
                    "lora: PEFT's LoRA branch with fp32 and bf16 adapters, its GEMMs one by one; "
                    "moe: grouped_mm experts' sentinel masked_fill and gated activation on chunks")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("cuda_bwd_kernels.py: no CUDA device", file=sys.stderr)
        return 2
    with open(a.out, "a") as f:
        sets = {"ops": cases, "broadcast": broadcast_cases, "lora": lora_cases, "moe": moe_cases}
        for name, mk, op in sets[a.set](dev, a.small):
            if a.deadline_s is not None and time.time() - T0 > a.deadline_s:
                rec = dict(case=name, skipped="deadline")
            else:
                try:
                    rec = run(name, mk, op, dev, a.reps)
                except Exception as e:  # record and go on
                    rec = dict(case=name, error=f"{type(e).__name__}: {e}")
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(name, rec.get("error") or rec.get("skipped") or
                  f"fwd {rec['forward_s'] * 1e3:.3f} ms bwd {rec['backward_s'] * 1e3:.3f} ms "
                  f"bwd kernels {[(k['name'][:40], k['count']) for k in rec['backward_kernels']]}",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
