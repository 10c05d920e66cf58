"""Real CUDA out-of-memory errors from setups memsh can describe, with every number the message prints.

Each case builds a transformers model from a config (cuda_hf.py's builders, random weights) and trains
steps until one raises torch.OutOfMemoryError. Recorded: the message itself (str(e): "Tried to allocate
X", "this process has Y memory in use", "Of the allocated memory Z is allocated by PyTorch, and W is
reserved by PyTorch but unallocated"), where it was raised (the step, the phase: forward, backward or the
optimizer step, and the last frames), the allocator's counters and the device's used memory right after
(torch.cuda.mem_get_info; nvidia-smi's per-process figure). A case that fits is recorded with its peaks.

    python3 tools/oracle/cuda_oom.py --out oom.jsonl [--cases llama1b_b64,llama8b_amp_adamw]
    python3 tools/oracle/cuda_oom.py --out /tmp/smoke.jsonl --device cpu   # smoke test, tiny models
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_hf import llama1b, llama8b, smi_used_mib, versions  # noqa: E402

# name: (config builder, batch, seq, weights dtype, autocast, steps)
#   llama1b_b64: Llama-3.2-1B bf16 weights at 64 x 2048: the forward's activations do not fit
#   llama8b_amp_adamw: Llama-3-8B fp32 weights + autocast(bf16), AdamW (foreach, the default) at 1 x 1024:
#   weights, gradients and the lazily made moments (128 GB) fit; the optimizer step's temporaries do not
CASES = {
    "llama1b_b64": (llama1b, 64, 2048, torch.bfloat16, False, 2),
    "llama8b_amp_adamw": (llama8b, 1, 1024, torch.float32, True, 2),
}



def run_case(name, dev, small):
    from transformers import AutoModelForCausalLM
    build, b, s, wdt, amp, steps = CASES[name]
    cfg = build()
    if small:
        cfg.num_hidden_layers, cfg.vocab_size, b, s = 2, 1000, 2, 64
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with dev:
        model = AutoModelForCausalLM.from_config(cfg)
    model = model.to(wdt)
    model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=torch.Generator().manual_seed(0)).to(dev)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    rec = dict(case=name, batch=b, seq=s, weights=str(wdt), autocast=amp, config=cfg.to_dict(), versions=versions(),
               params=sum(p.numel() for p in model.parameters()),
               total_memory=torch.cuda.get_device_properties(dev).total_memory if cuda else 0)
    phase, step = "", 0
    try:
        for step in range(1, steps + 1):
            opt.zero_grad(set_to_none=True)
            phase = "forward"
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                out = model(input_ids=ids, labels=ids)
            phase = "backward"
            out.loss.backward()
            del out
            phase = "optimizer"
            opt.step()
            if cuda:
                torch.cuda.synchronize()
        rec["fits"] = True
    except torch.OutOfMemoryError as e:
        rec.update(fits=False, message=str(e), step=step, phase=phase,
                   frames=traceback.format_exc()[-2500:])
    if cuda:
        st = torch.cuda.memory_stats()
        free, total = torch.cuda.mem_get_info()
        rec.update(allocated_after=torch.cuda.memory_allocated(), reserved_after=torch.cuda.memory_reserved(),
                   max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved(),
                   device_used_after=total - free, smi_used_mib=smi_used_mib(),
                   num_alloc_retries=st.get("num_alloc_retries"), num_ooms=st.get("num_ooms"))
    del model, opt, ids
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    with open(a.out, "a") as f:
        for name in a.cases.split(","):
            t = time.time()
            try:
                rec = run_case(name, dev, small=dev.type == "cpu")
            except BaseException as e:
                rec = dict(case=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:])
            rec["case_wall_s"] = time.time() - t
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            print(name, rec.get("error") or ("fits" if rec.get("fits") else f"OOM step {rec.get('step')} "
                  f"{rec.get('phase')}: {rec.get('message', '')[:400]}"), file=sys.stderr, flush=True)
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
