# cuda_dsa.py: DeepSeek Sparse Attention as transformers 5.17 trains it, on
# one GPU (prepared by helper dsa25, session 25; not yet run). For
# testdata/scripts/run_hf_deepseek_v32.txtar's two-layer DeepSeek-V3.2 and
# the same model as DeepSeek-V3 (no indexer), bf16 weights, AdamW (torch's
# default, states in bf16 as the weights), attn sdpa, batch 1:
#   - peak_allocated (torch.cuda.max_memory_allocated) of a warm step
#     (forward, backward, optimizer.step, zero_grad(set_to_none=True)),
#     and its median time over 3 steps after 2 warm-ups;
#   - which SDPA backend ran and what the attention saved of [.., S, S]
#     shape (memsh models a bf16 [1, 1, S, S] bias kept by the efficient
#     kernel: read in derivatives.yaml, never measured);
#   - the indexer's transient peak (max_memory_allocated inside its
#     forward over the allocated bytes at its start).
#   python3 cuda_dsa.py dsa_v32_2layers.json dsa_v3_2layers.json --seqs 2048,4096,8192 --out $OUT/dsa.jsonl
# (the configs are run_hf_deepseek_v32.txtar's v32.json and v3.json; about
# 3.4 B parameters, 32 to 60 GB: one H100 or H200, a few minutes)
# memsh's figures for the same runs: run_hf_deepseek_v32.txtar's want-a
# (peak 31.54/31.53/57.38 GiB and 114/214/486 ms at 2048/4096/8192 for
# V3.2; 31.48/31.48/40.92 GiB, 103/174/333 ms for V3, on an H200).
import argparse
import json
import statistics
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("v32")
ap.add_argument("v3")
ap.add_argument("--seqs", default="2048,4096,8192")
ap.add_argument("--out", default="dsa.jsonl")
args = ap.parse_args()
dev = torch.device("cuda")
out = open(args.out, "w")


def build(path):
    raw = json.load(open(path))
    raw.pop("quantization_config", None)
    cfg = AutoConfig.for_model(**raw)
    with torch.device(dev):
        m = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
    return m.train(), raw["vocab_size"]


def run(path, seq):
    torch.cuda.empty_cache()
    model, vocab = build(path)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(1, vocab, (1, seq), device=dev)
    peaks = []

    def pre(mod, a, kw):
        torch.cuda.synchronize()
        mod._start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()

    def post(mod, a, kw, o):
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - mod._start)

    saved = {}

    def pack(t):
        if t.dim() == 4 and t.shape[-1] == seq and t.shape[-2] == seq:
            key = (tuple(t.shape), str(t.dtype))
            saved[key] = saved.get(key, 0) + 1
        return t

    times, peak = [], 0
    for step in range(5):
        hooks = []
        if step == 4:
            for m in model.modules():
                if type(m).__name__.endswith("Indexer"):
                    hooks += [m.register_forward_pre_hook(pre, with_kwargs=True), m.register_forward_hook(post, with_kwargs=True)]
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t) if step == 3 else torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
            with ctx:
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as e:
            return {"oom": str(e)[:200]}
        torch.cuda.synchronize()
        if step in (2, 3, 4):
            times.append(time.perf_counter() - t0)
        if step == 2:
            peak = torch.cuda.max_memory_allocated()
        for h in hooks:
            h.remove()
    del model, opt
    return {"peak_allocated": peak, "step_s": statistics.median(times), "saved_SxS": {str(k): v for k, v in saved.items()},
            "indexer_peak": peaks[:2]}


ctx = {"torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(),
       "flash_sdp": torch.backends.cuda.flash_sdp_enabled(), "mem_efficient_sdp": torch.backends.cuda.mem_efficient_sdp_enabled(),
       "cudnn_sdp": torch.backends.cuda.cudnn_sdp_enabled()}
print(json.dumps(ctx), file=out, flush=True)
for seq in [int(s) for s in args.seqs.split(",")]:
    for name, path in (("v32", args.v32), ("v3", args.v3)):
        r = {"model": name, "seq": seq, **run(path, seq)}
        print(json.dumps(r), file=out, flush=True)
        print(json.dumps(r), flush=True)
