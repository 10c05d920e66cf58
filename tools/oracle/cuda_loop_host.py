"""The host's side of transformers' per-expert MoE loop on one CUDA GPU: what the CPU spends per aten op
and per host sync, measured apart from the loop, and the loop's own step split into forward and backward.

hf_profile.jsonl (session 19) showed the Qwen3-MoE per-expert loop host-bound: 0.15 s of kernels in a
0.70 s step, 54,308 aten ops, 17,672 kernels, 1,279 cudaStreamSynchronize (about five per expert pass:
transformers 5.17's `expert_idx == self.num_experts` test, `torch.where(expert_mask[expert_idx])`, and the
0-dim CUDA tensor indexes expert_mask[expert_idx], gate_up_proj[expert_idx], down_proj[expert_idx], which
PyTorch's indexing applies as select(tensor.item())). memsh charges 10 us a forward kernel and 6 us a
backward one. To model the loop's host time by a rule measured apart from it (not fitted to its row), this
script records:

  part "host": CPU seconds per call, back to back, of ops on small CUDA tensors (the GPU idle or ahead):
    a kernel-launching binary op (a + b), a unary one, a view (no kernel), an int select (no kernel),
    .item() of a 0-dim tensor (a sync with an idle GPU), w[t] with a 0-dim CUDA long tensor t (select via
    item: a sync), torch.where(mask) (nonzero: a sync), hidden[idx] (aten::index), index_add_, and autograd's
    backward per node over chains of mul, index and index_add_ (the loop's node kinds);
  part "loop": the qwen3_moe_loop case of cuda_hf.py (4 x 2048, 8 layers, 32 experts, top-8) for 3 steps,
    then one step under torch.profiler: per phase (forward, backward, optimizer step) its wall time, aten ops
    (all, and top-level ones: those not inside another aten op), kernels, cudaStreamSynchronize calls and
    the CPU time of the aten ops, so the host time per expert pass splits into ops and syncs.

    python3 tools/oracle/cuda_loop_host.py --out loop_host.jsonl [--parts host,loop] [--deadline-s 120]
    python3 tools/oracle/cuda_loop_host.py --out /tmp/smoke.jsonl --device cpu   # a smoke test, tiny shapes

One JSON line per part; a part that raises is written with "error" and the run goes on. About 60 s on an
H200 (the loop's model builds in seconds; each step is about 0.7 s).
"""
import argparse
import json
import sys
import time
import traceback

import torch

T0 = time.time()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def per_call(fn, n, dev):
    """CPU seconds per call of fn, n calls back to back after 50 of warm-up, synchronized at both ends."""
    for _ in range(50):
        fn()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    sync(dev)
    t2 = time.perf_counter()
    return dict(calls=n, cpu_s_per_call=(t1 - t0) / n, synced_s_per_call=(t2 - t0) / n)


def backward_per_node(make, n, dev):
    """Seconds per autograd node of a chain of n nodes made by make(x) -> y, backward only, synchronized."""
    x = torch.randn(64, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
    out = []
    for rep in range(3):
        y = x
        for _ in range(n):
            y = make(y)
        sync(dev)
        t0 = time.perf_counter()
        y.sum().backward()
        sync(dev)
        out.append(time.perf_counter() - t0)
        x.grad = None
    return dict(nodes=n, s_per_node=min(out) / n)


def part_host(dev, small):
    n = 200 if small else 5000
    bf = dict(device=dev, dtype=torch.bfloat16)
    a, b = torch.randn(64, 64, **bf), torch.randn(64, 64, **bf)
    w = torch.randn(32, 64, 64, **bf)
    t = torch.tensor(3, device=dev)
    mask = torch.rand(8, 256, device=dev) > 0.7
    hidden = torch.randn(256, 64, **bf)
    idx = torch.randint(0, 256, (64,), device=dev)
    src = torch.randn(64, 64, **bf)
    acc = torch.zeros(256, 64, **bf)
    rec = dict(part="host", calls={})
    cases = {
        "add (a kernel)": lambda: a + b,
        "neg (a kernel)": lambda: -a,
        "view (no kernel)": lambda: a.view(-1),
        "select with an int (no kernel)": lambda: w[3],
        "item of a 0-dim tensor (a sync)": lambda: t.item(),
        "w[t], t a 0-dim CUDA long tensor (select via item: a sync)": lambda: w[t],
        "torch.where(mask) (nonzero: a sync)": lambda: torch.where(mask),
        "hidden[idx] (aten::index)": lambda: hidden[idx],
        "index_add_": lambda: acc.index_add_(0, idx, src),
    }
    for name, fn in cases.items():
        rec["calls"][name] = per_call(fn, n, dev)
    m = 100 if small else 2000
    ridx = torch.randint(0, 64, (64,), device=dev)
    rec["backward"] = {
        "mul": backward_per_node(lambda y: y * 1.0001, m, dev),
        "index (IndexBackward0: zeros, index_put_ with accumulate)": backward_per_node(lambda y: y[ridx], m, dev),
        "index_add (IndexAddBackward0)": backward_per_node(
            lambda y: torch.zeros_like(y).index_add(0, ridx, y), m, dev),
    }
    return rec


def phase_counts(prof, windows):
    """Aten ops (all, top-level), kernels, syncs and aten CPU time inside each (name, start_us, end_us)."""
    evs = list(prof.events())
    out = {}
    for name, lo, hi in windows:
        aten, top, kern, syncs, aten_cpu = 0, 0, 0, 0, 0.0
        for e in evs:
            s = e.time_range.start
            if s < lo or s > hi:
                continue
            dt = getattr(e, "device_type", None)
            if dt is not None and str(dt).endswith("CUDA"):
                kern += 1
            elif e.name.startswith("aten::"):
                aten += 1
                parent = getattr(e, "cpu_parent", None)
                if parent is None or not parent.name.startswith("aten::"):
                    top += 1
                    aten_cpu += e.cpu_time_total
            elif e.name == "cudaStreamSynchronize":
                syncs += 1
        out[name] = dict(aten_ops=aten, top_level_aten_ops=top, kernels=kern, stream_syncs=syncs,
                         top_level_aten_cpu_s=aten_cpu / 1e6)
    return out


def part_loop(dev, small, steps=4, experts=32):
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig
    from torch.profiler import profile, ProfilerActivity, record_function
    cfg = Qwen3MoeConfig(vocab_size=151936, hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
                         num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                         num_experts=experts, num_experts_per_tok=8, decoder_sparse_step=1, norm_topk_prob=True,
                         max_position_embeddings=40960, tie_word_embeddings=False)
    b, s = 4, 2048
    if small:
        cfg.num_hidden_layers, cfg.vocab_size, b, s = 2, 1000, 2, 64
    cfg._attn_implementation = "sdpa"
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    with dev:
        model = AutoModelForCausalLM.from_config(cfg)
    model = model.to(torch.bfloat16)
    model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g).to(dev)
    rec = dict(part="loop", case="qwen3_moe_loop", batch=b, seq=s, layers=cfg.num_hidden_layers,
               experts=cfg.num_experts, steps=[])
    for step in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        sync(dev)
        prof = None
        if step == steps:
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
            prof = profile(activities=acts)
            prof.__enter__()
        marks = []
        t0 = time.perf_counter()
        with record_function("phase_forward"):
            loss = model(input_ids=ids, labels=ids).loss
            sync(dev)
        t1 = time.perf_counter()
        with record_function("phase_backward"):
            loss.backward()
            sync(dev)
        t2 = time.perf_counter()
        with record_function("phase_optimizer"):
            opt.step()
            sync(dev)
        t3 = time.perf_counter()
        srec = dict(step=step, wall_s=dict(forward=t1 - t0, backward=t2 - t1, opt_step=t3 - t2, step=t3 - t0))
        if prof is not None:
            prof.__exit__(None, None, None)
            for e in prof.events():
                if e.name.startswith("phase_") and (getattr(e, "device_type", None) is None
                                                    or not str(e.device_type).endswith("CUDA")):
                    marks.append((e.name, e.time_range.start, e.time_range.end))
            srec["profile"] = phase_counts(prof, marks)
        rec["steps"].append(srec)
        del loss
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="host,loop")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline-s", type=float, default=120)
    ap.add_argument("--experts", type=int, default=32,
                    help="routed experts of the loop part (two runs differ by the ops of the passes between them)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    small = dev.type != "cuda"
    with open(a.out, "w") as f:
        for part in a.parts.split(","):
            if time.time() - T0 > a.deadline_s:
                print(f"deadline: {part} not run", file=sys.stderr)
                break
            try:
                rec = part_host(dev, small) if part == "host" else part_loop(dev, small, experts=a.experts)
            except Exception as e:  # noqa: BLE001 - record and go on
                rec = dict(part=part, error=repr(e), trace=traceback.format_exc()[-2000:])
            rec["torch"] = torch.__version__
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(part, "done", round(time.time() - T0, 1), "s", file=sys.stderr)


if __name__ == "__main__":
    main()
