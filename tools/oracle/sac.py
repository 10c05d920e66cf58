#!/usr/bin/env python3
"""What a Llama block holds at the end of its forward under torchtitan's per-op selective checkpointing.

Measures, on the CPU, the storages a block keeps alive once its forward has returned (everything the backward
will need: autograd's saved tensors, a checkpoint's inputs, the selective-checkpoint cache), by watching every
storage an op makes (a TorchDispatchMode recording a weak reference to each output storage) and listing those
still alive after the forward, less the parameters, the buffers and the caller's tensors. Each is named by the
aten op that made it.

The block is blocks.py's (HF Llama: RMSNorm, q/k/v/o projections, RoPE from fp32 buffers, repeat_kv, SDPA,
SwiGLU MLP), in bf16 (bf16 weights, as FSDP2's MixedPrecisionPolicy gathers them). Policies:
  none       no checkpointing
  full       torch.utils.checkpoint(use_reentrant=False) around the block
  op         torchtitan's per-op SAC (torchtitan 9dec370, torchtitan/parallelisms/parallelize_llama.py:
             _save_list = {aten.mm, aten._scaled_dot_product_efficient_attention,
             aten._scaled_dot_product_flash_attention, _c10d_functional.reduce_scatter_tensor, aten.abs,
             aten.max}; MUST_SAVE for ops in the list except every second aten.mm of the block (counted
             separately in forward and in recompute), PREFER_RECOMPUTE for the rest), through
             create_selective_checkpoint_contexts. On the CPU, SDPA runs
             aten._scaled_dot_product_flash_attention_for_cpu, which stands in for the CUDA flash kernel.

    ~/venv-oracle/bin/python tools/oracle/sac.py        # torch 2.15.0, one thread
"""
import gc
import json
import sys
from collections import defaultdict
from functools import partial

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from blocks import Block

aten = torch.ops.aten
SAVE_LIST = {
    aten.mm.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,  # the CPU stand-in for the flash kernel
    aten.abs.default,
    aten.max.default,
}


def titan_policy(meta, ctx, func, *args, **kwargs):
    mode = "recompute" if ctx.is_recompute else "forward"
    key = mode + "_mm_count"
    if func == aten.mm.default:
        meta[key] += 1
    save = func in SAVE_LIST and not (func == aten.mm.default and meta[key] % 2 == 0)
    return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE


def titan_context():
    return create_selective_checkpoint_contexts(partial(titan_policy, defaultdict(int)))


class Made(TorchDispatchMode):
    """Records a weak reference to every storage an op outputs, with the op's name."""

    def __init__(self):
        super().__init__()
        self.made = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                s = t.untyped_storage()
                p = s.data_ptr()
                if p not in self.made or self.made[p][0].expired():
                    self.made[p] = (StorageWeakRef(s), s.nbytes(), str(func).replace("aten.", ""), str(t.dtype).replace("torch.", ""), tuple(t.shape))
        return out


def held(c, policy, depth):
    """The storages alive after a forward of `depth` blocks: a list of (op, dtype, shape, bytes)."""
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([Block(c, i) for i in range(depth)]).to(torch.bfloat16)
    x0 = torch.randn(c["b"], c["s"], c["h"], dtype=torch.bfloat16, requires_grad=True)
    keep = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    keep |= {b.untyped_storage().data_ptr() for b in blocks.buffers()}
    keep.add(x0.untyped_storage().data_ptr())
    rec = Made()
    with rec:
        x = x0
        for blk in blocks:
            if policy == "none":
                x = blk(x)
            elif policy == "full":
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = checkpoint(blk, x, use_reentrant=False, context_fn=titan_context)
        y = x
    gc.collect()
    out = []
    for p, (ref, nb, op, dt, shape) in rec.made.items():
        if ref.expired() or p in keep or p == y.untyped_storage().data_ptr():
            continue
        out.append((op, dt, shape, nb))
    y.float().sum().backward()  # the graph is whole: the backward runs
    return sorted(out)


def main():
    torch.set_num_threads(1)
    # a Llama-3-shaped block, small: h=256, 8 heads of 32, 2 kv heads, ffn 688, b=2, s=64
    c = dict(h=256, a=8, kv=2, ffn=688, s=64, b=2, vocab=0, norm="rmsnorm", fused_qkv=False, qkv_bias=False,
             out_bias=False, rope=True, softmax_fp32=True, attn="sdpa", attn_drop=0.0, act="swiglu",
             mlp_bias=False, mlp_drop=0.0, ckpt={"mode": "none", "reentrant": False})
    res = {"torch": torch.__version__, "config": c}
    for policy in ("none", "full", "op"):
        one, two = held(c, policy, 1), held(c, policy, 2)
        res[policy] = {"per_block": sum(t[3] for t in two) - sum(t[3] for t in one), "depth1": one}
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
