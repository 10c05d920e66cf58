#!/usr/bin/env python3
"""What torch.compile's partitioner saves for the backward of one compiled block.

Each block is compiled on its own (as torchtune's and torchtitan's compile do: torch.compile per
transformer block) with a backend that runs AOTAutograd with Inductor's decompositions and its
partitioner, min_cut_rematerialization_partition(compiler="inductor") (what Inductor uses; the kernels
then run eagerly, as the aot_eager_decomp_partition backend does). The forward graph's outputs past the
block's own output are what the compiled forward hands to its backward: the saved set. Each saved value
is listed with the op that makes it (a placeholder is the block's input or a parameter), its dtype, shape
and bytes.

On the CPU, SDPA runs aten._scaled_dot_product_flash_attention_for_cpu, which the partitioner does not list
among its compute-intensive ops; it is added to them here (cuda_op_list), as the CUDA flash kernel it stands
for is.

Blocks are blocks.py's in bf16 (bf16 weights, as FSDP2's MixedPrecisionPolicy gathers them). Cases:
  compile          the block compiled, no checkpointing
  compile+op       torchtitan's per-op selective checkpointing (sac.py's policy) inside the compiled block
  budget=B         activation_memory_budget B (torch._functorch.config), no checkpointing

    ~/venv-oracle/bin/python tools/oracle/compiled.py     # torch 2.15.0, one thread
"""
import json
import operator
import sys

import torch
import torch._functorch.config as fconfig
from torch._dynamo.backends.common import aot_autograd
import torch._functorch.partitioners as partitioners
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.utils.checkpoint import checkpoint

from blocks import Block
from sac import titan_context

RECORD = []
aten = torch.ops.aten
VIEWS = {aten.view.default, aten._unsafe_view.default, aten.alias.default, aten.permute.default, aten.t.default,
         aten.unsqueeze.default, aten.squeeze.dim, aten.expand.default, aten.slice.Tensor, aten.transpose.int,
         aten.reshape.default}


def recording_partition(joint, inputs, **kw):
    fw, bw = min_cut_rematerialization_partition(joint, inputs, compiler="inductor", **kw)
    n = kw["num_fwd_outputs"]
    out = next(x for x in fw.graph.nodes if x.op == "output").args[0]
    saved, bases = [], set()
    for node in out[n:]:
        if not isinstance(node, torch.fx.Node) or not isinstance(node.meta.get("val"), torch.Tensor):
            continue
        base = node
        while base.op == "call_function" and base.target in VIEWS:  # a view saves its base's storage
            base = base.args[0]
        if base in bases:
            continue
        bases.add(base)
        v = base.meta["val"]
        op = base.name if base.op == "placeholder" else str(base.target).replace("aten.", "")
        if base.target is operator.getitem:
            op = str(base.args[0].target).replace("aten.", "") + "[%d]" % base.args[1]
        saved.append((base.op == "placeholder", op, str(v.dtype).replace("torch.", ""), tuple(v.shape),
                      v.numel() * v.element_size()))
    RECORD.append(saved)
    return fw, bw


def cuda_op_list():
    """The partitioner's op classes with the CPU's SDPA kernel among the compute-intensive ops, as its CUDA
    counterpart (_scaled_dot_product_flash_attention) is: without it the memory budget's aggressive cut would
    recompute attention on the CPU where CUDA cannot."""
    ops = ORIGINAL_OP_LIST()
    ops.compute_intensive_ops.add(aten._scaled_dot_product_flash_attention_for_cpu)
    return ops


ORIGINAL_OP_LIST = partitioners.get_default_op_list
partitioners.get_default_op_list = cuda_op_list


def backend(gm, example_inputs):
    from torch._inductor.compile_fx import select_decomp_table
    nop = lambda g, _: g
    return aot_autograd(fw_compiler=nop, bw_compiler=nop, decompositions=select_decomp_table(),
                        partition_fn=recording_partition)(gm, example_inputs)


def saved_set(c, case):
    torch._dynamo.reset()
    RECORD.clear()
    torch.manual_seed(0)
    dt = torch.float32 if c.get("dtype") in ("fp32", "amp_bf16") else torch.bfloat16
    blk = Block(c, 0).to(dt)
    x = torch.randn(c["b"], c["s"], c["h"], dtype=dt, requires_grad=True)
    if case == "compile+op":
        fn = torch.compile(lambda t: checkpoint(blk, t, use_reentrant=False, context_fn=titan_context),
                           backend=backend, fullgraph=True)
    else:
        fn = torch.compile(blk, backend=backend, fullgraph=True)
    budget = 1.0
    if case.startswith("budget="):
        budget = float(case.split("=")[1])
    with fconfig.patch(activation_memory_budget=budget), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=c.get("dtype") == "amp_bf16"):
        y = fn(x)
    y.float().sum().backward()
    assert len(RECORD) == 1, RECORD
    return [dict(placeholder=p, op=op, dtype=dt, shape=list(sh), bytes=nb) for p, op, dt, sh, nb in RECORD[0]]


def loss_saved_set(b, s, vocab):
    """torchtune's compiled compute_cross_entropy on one bf16 logits chunk [b, s, vocab]."""
    torch._dynamo.reset()
    RECORD.clear()
    torch.manual_seed(0)
    logits = torch.randn(b, s, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (b, s))
    fn = torch.compile(lambda l, t: torch.nn.functional.cross_entropy(l.float().reshape(-1, vocab), t.reshape(-1),
                                                                       reduction="sum"), backend=backend, fullgraph=True)
    fn(logits, labels).backward()
    return [dict(placeholder=p, op=op, dtype=dt, shape=list(sh), bytes=nb) for p, op, dt, sh, nb in RECORD[0]]


def main():
    if sys.argv[1:] == ["loss"]:
        torch.set_num_threads(1)
        json.dump({"torch": torch.__version__, "loss [2, 32, 500]": loss_saved_set(2, 32, 500)}, sys.stdout, indent=1)
        print()
        return
    torch.set_num_threads(1)
    c = dict(h=256, a=8, kv=2, ffn=688, s=64, b=2, vocab=0, norm="rmsnorm", fused_qkv=False, qkv_bias=False,
             out_bias=False, rope=True, softmax_fp32=True, attn="sdpa", attn_drop=0.0, act="swiglu",
             mlp_bias=False, mlp_drop=0.0, ckpt={"mode": "none", "reentrant": False})
    args = sys.argv[1:]
    if args and args[0].startswith("{"):  # a configuration (JSON) to measure instead of the Llama block
        c.update(json.loads(args.pop(0)))
    cases = args or ["compile", "compile+op", "budget=0.5", "budget=0"]
    res = {"torch": torch.__version__, "config": c}
    for case in cases:
        s = saved_set(c, case)
        res[case] = {"activations": sum(v["bytes"] for v in s if not v["placeholder"]),
                     "inputs": sum(v["bytes"] for v in s if v["placeholder"] and v["op"].startswith("primals") and len(v["shape"]) == 3),
                     "saved": s}
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
