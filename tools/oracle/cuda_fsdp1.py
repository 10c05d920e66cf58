"""FSDP2 (fully_shard) on one GPU: what its streams and NCCL add to a training step's memory.

A one-rank process group (NCCL) runs a transformers model under torchtitan's wrapping: fully_shard on each
decoder layer, then on the root, with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) over fp32
parameters, AdamW (foreach, the CUDA default). Each step's all-gathers and reduce-scatters run as on many
ranks (FSDP2 has no one-rank shortcut: its copy-in/copy-out buffers and its all-gather and reduce-scatter
streams are the same), so the allocator's per-stream pools show. Recorded per batch size and step:
max_memory_allocated, max_memory_reserved, the segments per stream, the device's used memory
(torch.cuda.mem_get_info) and nvidia-smi's figure for the process; once: the device memory
init_process_group and the first collective add outside the caching allocator (NCCL's own).

    python3 tools/oracle/cuda_fsdp1.py --out fsdp1.jsonl [--batches 2,4,8] [--steps 4]
    python3 tools/oracle/cuda_fsdp1.py --out /tmp/smoke.jsonl --device cpu     # smoke test (gloo, tiny model)

--grad-accum N runs N micro-batches a step (FSDP2 reduce-scatters each, torchtitan's way); --empty-cache
calls torch.cuda.empty_cache() at each step's start (memsh's train(empty_cache=True)); --fresh-process is
for the runner: one batch size per process, so no pool of an earlier model's streams stays cached.
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_hf import llama1b, smi_used_mib, versions  # noqa: E402



def used(cuda):
    if not cuda:
        return 0
    free, total = torch.cuda.mem_get_info()
    return total - free


def per_stream(cuda):
    """Reserved bytes and segment counts per stream (torch.cuda.memory_snapshot)."""
    if not cuda:
        return {}
    out = {}
    for sg in torch.cuda.memory_snapshot():
        s = out.setdefault(str(sg["stream"]), [0, 0, 0])
        s[0] += sg["total_size"]
        s[1] += sg["allocated_size"]
        s[2] += 1
    return {k: dict(reserved=v[0], allocated=v[1], segments=v[2]) for k, v in out.items()}


def run_batch(b, s, steps, dev, small, accum=1, empty_cache=False):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM
    cuda = dev.type == "cuda"
    cfg = llama1b()
    if small:
        cfg.num_hidden_layers, cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size = 2, 1000, 256, 512
        cfg.num_attention_heads, cfg.num_key_value_heads, b, s = 4, 2, 2, 64
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with dev:
        model = AutoModelForCausalLM.from_config(cfg)
    model = model.to(torch.float32)
    model.config.use_cache = False
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=torch.Generator().manual_seed(0)).to(dev)
    rec = dict(batch=b, seq=s, grad_accum=accum, empty_cache=empty_cache,
               params=sum(p.numel() for p in model.parameters()), steps=[])
    for step in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.synchronize()
            if empty_cache:
                torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        a0 = torch.cuda.memory_allocated() if cuda else 0
        t0 = time.time()
        for _ in range(accum):
            out = model(input_ids=ids, labels=ids)
            (out.loss / accum).backward()
            del out
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        st = torch.cuda.memory_stats() if cuda else {}
        rec["steps"].append(dict(step=step, at_start=a0, wall_s=time.time() - t0,
                                 max_memory_allocated=torch.cuda.max_memory_allocated() if cuda else 0,
                                 max_memory_reserved=torch.cuda.max_memory_reserved() if cuda else 0,
                                 reserved_after=torch.cuda.memory_reserved() if cuda else 0,
                                 num_alloc_retries=st.get("num_alloc_retries"),
                                 per_stream=per_stream(cuda), device_used=used(cuda)))
    rec["smi_used_mib"] = smi_used_mib() if cuda else None
    del model, opt, ids
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="2,4,8")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--empty-cache", action="store_true")
    ap.add_argument("--port", default="29517")
    a = ap.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", a.port)
    head = dict(versions=versions(), nccl_env={k: v for k, v in os.environ.items() if k.startswith("NCCL")})
    if cuda:
        torch.cuda.set_device(0)
        torch.zeros(1, device=dev)  # the context first, so that what follows is NCCL's
        torch.cuda.synchronize()
        head["used_after_context"] = used(cuda)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    if cuda:
        head["used_after_init"] = used(cuda)
        x = torch.ones(1 << 20, device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()
        head["used_after_first_collective"] = used(cuda)
        head["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    with open(a.out, "a") as f:
        f.write(json.dumps(dict(header=head)) + "\n")
        for b in [int(x) for x in a.batches.split(",")]:
            t = time.time()
            try:
                rec = run_batch(b, a.seq, a.steps, dev, small=not cuda, accum=a.grad_accum, empty_cache=a.empty_cache)
            except BaseException as e:  # an OOM: record and go on
                rec = dict(batch=b, error=f"{type(e).__name__}: {e}"[:2000], traceback=traceback.format_exc()[-2000:])
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()
            rec["case_wall_s"] = time.time() - t
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            last = rec.get("steps", [{}])[-1] if rec.get("steps") else {}
            print(f"batch {b}: {rec.get('error', '')} max_alloc {last.get('max_memory_allocated')} "
                  f"max_res {last.get('max_memory_reserved')} used {last.get('device_used')} "
                  f"streams {list((last.get('per_stream') or {}).keys())}", file=sys.stderr, flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
