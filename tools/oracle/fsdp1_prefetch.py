"""FSDP1's backward prefetch modes on the CPU: the order in which FullyShardedDataParallel unshards, reshards and
reduce-scatters its units through one steady training step, under each backward_prefetch: the figures
sim/fsdp1_prefetch_test.go holds memsh's replay against.

    /work/venv-t/bin/python tools/oracle/fsdp1_prefetch.py > sim/testdata/fsdp1_prefetch.jsonl   # torch 2.15.0, CPU

The model is fsdp_live.py's tiny torchtitan Llama (dim 256, 8 heads, 4 KV heads, FFN 512, vocabulary 1,024), with 3
layers, batch 2 x 64, on a fake process group of 4 ranks (torch.testing._internal.distributed.fake_pg: no collective
runs, every buffer has its real shape). FullyShardedDataParallel wraps each block (ModuleWrapPolicy) and the root,
use_orig_params=True, MixedPrecision(param_dtype=bf16, reduce_dtype=fp32); with "full" each block runs under
checkpoint_wrapper (non-reentrant), applied before the wrap as Lightning and accelerate do. Sharding FULL_SHARD, and
SHARD_GRAD_OP (the parameters kept gathered from the forward to the backward) without checkpointing; and
forward_prefetch=True with and without checkpointing.

What is recorded: torch.distributed.fsdp._runtime_utils's _unshard, _reshard and _reduce_grad are wrapped; an
unshard or reshard is recorded when it changes the size of the unit's padded unsharded FlatParameter storage
(_full_param_padded: the all-gather's output, allocated at unshard, freed at reshard), a reduce-scatter at each
_reduce_grad. The first step runs unrecorded, then zero_grad(set_to_none=True), then the recorded step.
"""
import json
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp import _runtime_utils as ru
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.testing._internal.distributed.fake_pg import FakeStore

import fsdp_live

MODEL = dict(fsdp_live.MODEL, layers=3)
BATCH, SEQ, DP = 2, 64, 4
MODES = {"pre": BackwardPrefetch.BACKWARD_PRE, "post": BackwardPrefetch.BACKWARD_POST, "none": None}
STRATEGIES = {"full_shard": ShardingStrategy.FULL_SHARD, "shard_grad_op": ShardingStrategy.SHARD_GRAD_OP}

events, names, phase = [], {}, ["forward"]


def unit(handle):
    return names[id(handle._fully_sharded_module)]


def padded_size(handle):
    return handle.flat_param._full_param_padded.untyped_storage().nbytes()


def record(fn, action):
    def wrapped(state, handle, *args, **kwargs):
        before = padded_size(handle)
        out = fn(state, handle, *args, **kwargs)
        if padded_size(handle) != before:
            events.append(f"{phase[0]} {action} {unit(handle)}")
        return out
    return wrapped


def reduce_grad(fn):
    def wrapped(state, handle, *args, **kwargs):
        events.append(f"{phase[0]} reduce {unit(handle)}")
        return fn(state, handle, *args, **kwargs)
    return wrapped


ru._unshard = record(ru._unshard, "gather")
ru._reshard = record(ru._reshard, "reshard")
ru._reduce_grad = reduce_grad(ru._reduce_grad)


def run(mode, ckpt, strategy, forward):
    torch.manual_seed(0)
    model = fsdp_live.Transformer(MODEL, SEQ)
    if ckpt == "full":
        for k, block in list(model.layers.items()):
            model.layers[k] = checkpoint_wrapper(block, preserve_rng_state=False)
    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({fsdp_live.Block}), device_id=torch.device("cpu"),
                 backward_prefetch=MODES[mode], sharding_strategy=STRATEGIES[strategy], forward_prefetch=forward,
                 use_orig_params=True,
                 mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
    names.clear()
    for name, m in model.named_modules():
        if isinstance(m, FSDP):
            name = name.replace("_fsdp_wrapped_module.", "").replace("._checkpoint_wrapped_module", "")
            names[id(m.module)] = name or "root"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, MODEL["vocab"], (BATCH, SEQ))
    for step in range(2):
        events.clear()
        phase[0] = "forward"
        out = model(tokens)
        phase[0] = "backward"
        out.float().sum().backward()
        phase[0] = "optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
    return list(events)


def main():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=DP)
    for strategy, ckpt, forward in [("full_shard", "none", False), ("full_shard", "full", False), ("shard_grad_op", "none", False),
                                    ("full_shard", "none", True), ("full_shard", "full", True)]:
        for mode in MODES:
            print(json.dumps({"backward_prefetch": mode, "checkpoint": ckpt, "sharding_strategy": strategy,
                              "forward_prefetch": forward, "dp": DP, "batch": BATCH, "seq": SEQ, "model": MODEL,
                              "events": run(mode, ckpt, strategy, forward), "torch": torch.__version__}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
