"""Whole Hugging Face models trained on one CUDA GPU: peak memory and step time, for memsh's importer.

Each case builds a transformers model from a config (random weights, nothing downloaded) directly on the
GPU, then runs steps of forward (with labels: the model's own loss) + backward + optimizer step, and
records per step: allocated at start, max_memory_allocated, max_memory_reserved (peaks reset at step
start), after_forward, and the synchronised wall time. Step 1 pays the lazy creations (optimizer state,
cuBLAS workspaces); the last step is the steady state. The config is written out whole (config.to_dict()),
so memsh's hf_config can read the very model that ran.

    python3 tools/oracle/cuda_hf.py --out hf.jsonl [--cases llama1b_bf16,...] [--deadline-s 150]
    python3 tools/oracle/cuda_hf.py --out /tmp/smoke.jsonl --device cpu     # a smoke test, tiny models

--segments adds, after each step, the caching allocator's segments (torch.cuda.memory_snapshot(): each
segment's size, allocated bytes, stream and pool kind), to see which of step 1's segments the steady step
reuses. --profile runs the last step under torch.profiler and adds what the GPU did in it: the kernels'
summed device time, their count, the CUDA runtime calls (launches, synchronisations, copies) and the top
kernels by time, against the unprofiled step before it.

One JSON line per case; a case that raises is written with "error" and the run goes on.
"""
import argparse
import gc
import json
import sys
import time
import traceback

import torch

T0 = time.time()


def llama1b():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True)


def llama8b():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False)


def qwen3_06b():
    from transformers import Qwen3Config
    return Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True)


def qwen3_moe_small():
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(vocab_size=151936, hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
                          num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                          num_experts=32, num_experts_per_tok=8, decoder_sparse_step=1, norm_topk_prob=True,
                          max_position_embeddings=40960, tie_word_embeddings=False)


def mixtral_small():
    from transformers import MixtralConfig
    return MixtralConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
                         max_position_embeddings=32768, tie_word_embeddings=False)


# name: (config builder, batch, seq, variant)
#   variant: bf16 = bf16 weights, AdamW on bf16; amp = fp32 weights + autocast(bf16) (HF Trainer bf16=True);
#   ckpt = bf16 + gradient_checkpointing_enable(use_reentrant=False); lora = bf16 frozen base + PEFT LoRA r=16
#   on all linear layers + gradient checkpointing (use_reentrant=False); loop = bf16 with the experts run as
#   transformers' per-expert loop (experts_implementation="eager"; its default here is "grouped_mm");
#   compile = bf16 with the whole model under torch.compile (Inductor, default mode; step 1 compiles, and
#   the loss is inside the compiled graph); lora_bf16ad = lora with get_peft_model(...,
#   autocast_adapter_dtype=False): the adapters stay in bf16 instead of PEFT's default fp32
CASES = {
    "llama1b_bf16": (llama1b, 4, 2048, "bf16"),
    "llama1b_amp": (llama1b, 4, 2048, "amp"),
    "llama1b_ckpt": (llama1b, 4, 2048, "ckpt"),
    "llama1b_lora": (llama1b, 4, 2048, "lora"),
    "llama1b_compile": (llama1b, 4, 2048, "compile"),
    "qwen3_06b_bf16": (qwen3_06b, 8, 2048, "bf16"),
    "llama8b_ckpt": (llama8b, 2, 4096, "ckpt"),
    "llama8b_lora": (llama8b, 4, 4096, "lora"),
    "qwen3_moe_bf16": (qwen3_moe_small, 4, 2048, "bf16"),
    "qwen3_moe_loop": (qwen3_moe_small, 4, 2048, "loop"),
    "mixtral_bf16": (mixtral_small, 4, 2048, "bf16"),
    "llama1b_lora_bf16ad": (llama1b, 4, 2048, "lora_bf16ad"),
}


def versions():
    v = {"torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("transformers", "peft", "accelerate"):
        try:
            v[name] = __import__(name).__version__
        except Exception as e:  # not installed
            v[name] = f"missing: {e}"
    return v


def smi_used_mib():
    """This process's used GPU memory as nvidia-smi shows it (MiB), or why it cannot be read."""
    import os
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            pid, used = [x.strip() for x in line.split(",")]
            if int(pid) == os.getpid():
                return int(used)
    except Exception as e:  # no nvidia-smi, or another format
        return f"unavailable: {e}"
    return None


class Mem:
    """The torch.cuda counters, or zeros on the CPU (--device cpu is a smoke test of the script itself)."""

    def __init__(self, dev):
        self.on = dev.type == "cuda"

    def __getattr__(self, k):
        if self.on:
            return getattr(torch.cuda, k)
        return {"memory_stats": dict, "mem_get_info": lambda: (0, 0)}.get(k, lambda *a, **kw: 0)


def segments(dev):
    """The caching allocator's segments now: [size, allocated, stream, pool] each, largest first."""
    if dev.type != "cuda":
        return []
    segs = [[sg["total_size"], sg["allocated_size"], sg["stream"], sg.get("segment_type", "")]
            for sg in torch.cuda.memory_snapshot()]
    return sorted(segs, reverse=True)


def op_summary(prof, top):
    """The profiled step's aten ops by name and input shapes (record_shapes): calls, self device time (the
    kernels each launched itself) and device time with its children's, the top ones by self device time."""
    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        self_us = getattr(e, "self_device_time_total", None)
        if self_us is None:  # torch before 2.4
            self_us = getattr(e, "self_cuda_time_total", 0)
        total_us = getattr(e, "device_time_total", None)
        if total_us is None:
            total_us = getattr(e, "cuda_time_total", 0)
        cpu_us = e.self_cpu_time_total
        if self_us <= 0 and total_us <= 0 and cpu_us <= 0:
            continue
        rows.append(dict(name=e.key, shapes=str(e.input_shapes)[:300], count=e.count,
                         self_device_s=self_us / 1e6, device_s=total_us / 1e6, self_cpu_s=cpu_us / 1e6))
    rows.sort(key=lambda r: (-r["self_device_s"], -r["self_cpu_s"]))
    return rows[:top]


def profile_summary(prof, top=25):
    """What the GPU ran in a profiled step: kernel time and count, runtime calls, the top kernels."""
    kern, runtime, aten = {}, {}, 0
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        name = e.name
        if dt is not None and str(dt).endswith("CUDA"):
            k = kern.setdefault(name, [0, 0.0])
            k[0] += 1
            k[1] += e.time_range.elapsed_us()
        elif name.startswith("aten::"):
            aten += 1
        elif name.startswith("cuda") or name.startswith("cu"):
            r = runtime.setdefault(name, [0, 0.0])
            r[0] += 1
            r[1] += e.cpu_time_total
    total_us = sum(v[1] for v in kern.values())
    top = sorted(kern.items(), key=lambda kv: -kv[1][1])[:top]
    return dict(kernel_time_s=total_us / 1e6, kernels=sum(v[0] for v in kern.values()), aten_ops=aten,
                runtime_calls={k: dict(count=v[0], cpu_s=v[1] / 1e6) for k, v in runtime.items()},
                top_kernels=[dict(name=k[:160], count=v[0], time_s=v[1] / 1e6) for k, v in top])


def run_case(name, steps, dev, shrink=False, empty_cache_steps=False, want_segments=False, want_profile=False,
             bf16_build=False, profile_top=25, profile_ops=0):
    from transformers import AutoModelForCausalLM
    build, b, s, variant = CASES[name]
    cfg = build()
    if shrink:  # the smoke test: the same code on a tiny model
        cfg.num_hidden_layers, cfg.vocab_size, b, s = 2, 1000, 2, 64
    cfg._attn_implementation = "sdpa"
    if variant == "loop":
        cfg._experts_implementation = "eager"
    cuda = Mem(dev)
    torch.manual_seed(0)
    with dev:
        if bf16_build and variant != "amp":  # built in bf16: no fp32 copy's segments left behind
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
        else:
            model = AutoModelForCausalLM.from_config(cfg)
    model = model.to(torch.float32 if variant == "amp" else torch.bfloat16)
    model.config.use_cache = False
    if variant in ("ckpt", "lora", "lora_bf16ad"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if variant in ("lora", "lora_bf16ad"):
        from peft import LoraConfig, get_peft_model
        model.enable_input_require_grads()
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"),
                               autocast_adapter_dtype=variant == "lora")
    model.train()
    if variant == "compile":
        model = torch.compile(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g).to(dev)
    gc.collect()
    cuda.synchronize()
    cuda.empty_cache()
    rec = dict(case=name, variant=variant, batch=b, seq=s, config=cfg.to_dict(), versions=versions(),
               params=sum(p.numel() for p in model.parameters()), trainable=sum(p.numel() for p in trainable),
               param_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
               experts_implementation=getattr(model.config, "_experts_implementation", None),
               attn_implementation=getattr(model.config, "_attn_implementation", None),
               steps=[])
    for step in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        gc.collect()
        cuda.synchronize()
        if empty_cache_steps:  # the step starts from a cache of what persists: no segments of the steps before
            cuda.empty_cache()
        cuda.reset_peak_memory_stats()
        a0 = cuda.memory_allocated()
        prof = None
        if want_profile and step == steps:
            from torch.profiler import profile, ProfilerActivity
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
            prof = profile(activities=acts, record_shapes=profile_ops > 0)
            prof.__enter__()
        t0 = time.time()
        if variant == "amp":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
        else:
            out = model(input_ids=ids, labels=ids)
        loss = out.loss
        cuda.synchronize()
        af, pf = cuda.memory_allocated(), cuda.max_memory_allocated()
        t1 = time.time()
        loss.backward()
        del out, loss
        cuda.synchronize()
        pb = cuda.max_memory_allocated()
        t2 = time.time()
        opt.step()
        cuda.synchronize()
        t3 = time.time()
        st = cuda.memory_stats()
        srec = dict(step=step, at_start=a0, after_forward=af, peak_forward=pf,
                    peak_through_backward=pb, max_memory_allocated=cuda.max_memory_allocated(),
                    max_memory_reserved=cuda.max_memory_reserved(),
                    reserved_after_step=cuda.memory_reserved(),
                    after_step=cuda.memory_allocated(),
                    num_alloc_retries=st.get("num_alloc_retries"),
                    wall_s=dict(forward=t1 - t0, backward=t2 - t1, opt_step=t3 - t2, step=t3 - t0))
        if prof is not None:
            prof.__exit__(None, None, None)
            srec["profile"] = profile_summary(prof, profile_top)
            if profile_ops > 0:
                srec["profile"]["ops"] = op_summary(prof, profile_ops)
        if want_segments:
            srec["segments"] = segments(dev)
        rec["steps"].append(srec)
    free, total = cuda.mem_get_info()
    rec["device_used_after"] = total - free
    del model, opt, trainable, ids
    gc.collect()
    cuda.empty_cache()
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--deadline-s", type=float, default=None)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test on tiny models (no figures)")
    ap.add_argument("--empty-cache-steps", action="store_true",
                    help="torch.cuda.empty_cache() at each step's start: the reserve without the earlier steps' segments")
    ap.add_argument("--segments", action="store_true", help="the allocator's segments after each step")
    ap.add_argument("--profile", action="store_true", help="the last step under torch.profiler")
    ap.add_argument("--profile-top", type=int, default=25, help="how many of the profiled step's kernels to list")
    ap.add_argument("--profile-ops", type=int, default=0,
                    help="list this many of the profiled step's aten ops by input shapes (record_shapes), by self device time")
    ap.add_argument("--bf16-build", action="store_true",
                    help="build the model in bf16 (from_config(torch_dtype=bfloat16)) instead of fp32 cast to bf16")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("cuda_hf.py: no CUDA device", file=sys.stderr)
        return 2
    with open(a.out, "a") as f:
        for name in a.cases.split(","):
            if a.deadline_s is not None and time.time() - T0 > a.deadline_s:
                rec = dict(case=name, skipped="deadline")
            else:
                t = time.time()
                try:
                    rec = run_case(name, a.steps, dev, shrink=dev.type == "cpu", empty_cache_steps=a.empty_cache_steps,
                                   want_segments=a.segments, want_profile=a.profile, bf16_build=a.bf16_build,
                                   profile_top=a.profile_top, profile_ops=a.profile_ops)
                    rec["bf16_build"] = a.bf16_build
                    rec["empty_cache_steps"] = a.empty_cache_steps
                except BaseException as e:  # an OOM or an API difference: record and go on
                    rec = dict(case=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:])
                    gc.collect()
                    Mem(dev).empty_cache()
                rec["case_wall_s"] = time.time() - t
            line = json.dumps(rec, default=str)
            f.write(line + "\n")
            f.flush()
            last = rec.get("steps", [{}])[-1] if rec.get("steps") else {}
            print(f"{name}: {rec.get('error') or rec.get('skipped') or ''} max_alloc {last.get('max_memory_allocated')} "
                  f"max_res {last.get('max_memory_reserved')} step {last.get('wall_s', {}).get('step')}",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
