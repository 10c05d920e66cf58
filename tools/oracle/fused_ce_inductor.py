# fused_ce_inductor.py: what Inductor allocates for Megatron-Core's fused
# vocabulary-parallel cross-entropy (--cross-entropy-loss-fusion, the
# "native" implementation: megatron/core/fusions/fused_cross_entropy.py at
# core_r0.11.0 to core_r0.13.0, four functions under jit_fuser, which is
# torch.compile from torch 2.2: megatron/core/jit.py), read from the code it
# generates, on the CPU. The buffers a compiled graph allocates are decided
# before code generation (the lowering, functionalization and the
# scheduler's buffer reuse), so the same buffers appear for CUDA; the
# kernels' fusion may differ.
#
# The steps are megatron_ce_steps.py's (same directory), at tensor-
# parallel size 1. For each function the script lists the tensors of the
# logits' size the generated code allocates (empty_strided calls) and
# whether it writes into its input instead. Output: one JSON line per
# function.
#   python3 tools/oracle/fused_ce_inductor.py --out fused_ce_inductor.jsonl
# Run with torch 2.6.0 and 2.15 (CPU wheels), December 2026: the same
# lines (sim/testdata/fused_ce_inductor.jsonl).
import argparse
import json
import re

import torch
from torch._inductor.utils import run_and_get_code

from megatron_ce_steps import ce_loss, gradients, logits_max, predicted

p = argparse.ArgumentParser()
p.add_argument("--seq", type=int, default=64)
p.add_argument("--vocab", type=int, default=1024)
p.add_argument("--out", default="fused_ce_inductor.jsonl")
a = p.parse_args()


alloc = re.compile(r"empty_strided_cpu\(\(([0-9, ]*)\), \([0-9, ]*\), torch\.(\w+)\)")


def logit_buffers(code, n):
    out = []
    for dims, dtype in alloc.findall(code):
        numel = 1
        for d in dims.replace(" ", "").strip(",").split(","):
            numel *= int(d)
        if numel == n:
            out.append(dtype)
    return out


s, v = a.seq, a.vocab
n = s * v
x = (torch.randn(s, 1, v) * 2).to(torch.bfloat16)
target = torch.randint(0, v, (s, 1))
steps = []
xf, m = None, None
with open(a.out, "w") as f:
    def record(name, fn, *args):
        res, codes = run_and_get_code(torch.compile(fn), *args)
        code = "\n".join(codes)
        line = {"function": name, "torch": torch.__version__, "seq": s, "vocab": v,
                "logit_sized_buffers": logit_buffers(code, n)}
        print(json.dumps(line))
        f.write(json.dumps(line) + "\n")
        return res

    xf, m = record("calculate_logits_max", logits_max, x)
    mask, t1, pred_sum, e = record("calculate_predicted_logits", predicted, xf, target, m)
    e, loss = record("calculate_cross_entropy_loss", ce_loss, e, pred_sum)
    record("calculate_gradients", gradients, e, torch.ones(s, 1), mask, t1, True)
