# cuda_fused_ce.py: prepared, not run (issue 19, swift29). What Megatron-Core's
# vocab-parallel cross entropy holds on one GPU, eager (the path memsh lowers:
# sim/core/tp.go vocabParallelCE) against --cross_entropy_loss_fusion, which
# every Megatron-SWIFT script in sim/calib_swift_moe_test.go sets.
#
# The fused path (megatron/core/fusions/fused_cross_entropy.py at core_v0.11.0
# to core_v0.13.0) runs the same steps as the eager one (megatron/core/
# tensor_parallel/cross_entropy.py: an fp32 copy of the logits, the max
# subtracted in place, exp in place, divided by the sum in place and saved;
# the backward turns the saved softmax into the gradient in place) but as
# four functions under megatron.core.jit.jit_fuser, which is torch.compile
# from torch 2.2 on (megatron/core/jit.py). Under torch.compile the in-place
# updates of a function's input are functionalized; whether Inductor writes
# them back without a second fp32 buffer of the logits' size decides whether
# the fused loss peaks above memsh's 6 bytes a logit (bf16 logits + fp32
# softmax). The full-recompute rows peak at the loss on their last stage, so
# 4 bytes a logit more there would be 4.6 GiB on Qwen1.5-MoE's pp 2 row
# (8192 x 151936) and 2.3 GiB on Qwen3-30B-A3B's tp 2 row.
#
# Written from the steps above, at tensor-parallel size 1 (the all-reduces
# of the max and the sums are identities there). The logits are a bf16 leaf
# [s, 1, v] (Megatron's layout) that stays alive, as the output layer's
# output does while the loss runs; its gradient (bf16, what flows into the
# output layer) is counted in the backward.
#
# Output: one JSON line per (mode, vocab): bytes above the logits in the
# forward (peak, and held after it) and in the backward (peak), and per
# logit element. Under a minute on an H200 after compiling, torch alone:
#   python3 tools/oracle/cuda_fused_ce.py --out $OUT/fused_ce.jsonl
# (not smoke-tested here: no torch on the CPU machine).
import argparse
import json

import torch

from megatron_ce_steps import ce_loss, gradients, logits_max, predicted

p = argparse.ArgumentParser()
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--vocab", default="151936,163840,75968,81920,38016",
               help="Qwen1.5-MoE and Moonlight at tp 1, Qwen3-30B-A3B and Moonlight at tp 2, Qwen2.5-14B at tp 4")
p.add_argument("--modes", default="eager,fused")
p.add_argument("--out", default="fused_ce.jsonl")
a = p.parse_args()

dev = torch.device("cuda")


def make(compiled):
    f = torch.compile if compiled else (lambda fn: fn)
    lm, pr, cl, gr = f(logits_max), f(predicted), f(ce_loss), f(gradients)

    class CE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, target):
            x, m = lm(x)
            mask, t1, pred_sum, e = pr(x, target, m)
            e, loss = cl(e, pred_sum)
            ctx.save_for_backward(e, mask, t1)
            return loss

        @staticmethod
        def backward(ctx, g):
            e, mask, t1 = ctx.saved_tensors
            # the fused path casts inside the compiled function; the eager
            # one returns fp32 and autograd casts it to the logits' dtype
            return gr(e, g, mask, t1, compiled), None

    return CE


def run(mode, v):
    ce = make(mode == "fused")
    s = a.seq
    for it in range(3):  # the first compiles; report the last
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        x = (torch.randn(s, 1, v, device=dev) * 2).to(torch.bfloat16).requires_grad_()
        target = torch.randint(0, v, (s, 1), device=dev)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        loss = ce.apply(x, target)
        torch.cuda.synchronize()
        fwd_peak = torch.cuda.max_memory_allocated() - base
        held = torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        loss.sum().backward()
        torch.cuda.synchronize()
        bwd_peak = torch.cuda.max_memory_allocated() - base
        grad = x.grad.numel() * x.grad.element_size()
        n = s * v
        rec = {"mode": mode, "iter": it, "seq": s, "vocab": v, "torch": torch.__version__,
               "device": torch.cuda.get_device_name(), "fwd_peak_bytes": fwd_peak, "held_bytes": held,
               "bwd_peak_bytes": bwd_peak, "grad_bytes": grad,
               "fwd_peak_per_logit": fwd_peak / n, "held_per_logit": held / n, "bwd_peak_per_logit": bwd_peak / n}
        del loss, x, target
    return rec


with open(a.out, "a") as f:
    for v in [int(x) for x in a.vocab.split(",")]:
        for mode in a.modes.split(","):
            r = run(mode, v)
            print(json.dumps(r), flush=True)
            f.write(json.dumps(r) + "\n")
