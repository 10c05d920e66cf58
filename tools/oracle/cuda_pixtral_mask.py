"""Prepared, not run (session 29, pixtral_s29): what SDPA keeps for backward on CUDA given Pixtral's block mask, the
question memsh answers from PyTorch's source alone (sim/nn/vision_pixtral_lower.go, kernelBias): with a float mask
whose keys are not a multiple of 8, preprocess_mask (aten/src/ATen/native/transformers/attention.cpp, pad_bias<8>)
pads a copy of the mask at every call, which the efficient kernel keeps in place of the mask.

Like PixtralVisionModel under sdpa: LAYERS SDPA calls in a chain over one [1, 1, P, P] bf16 mask made once (torch.full
of the dtype's least value, zero blocks per image, [None, None] and expand, as generate_block_attention_mask does),
q, k, v [1, 16, P, 64] bf16 needing grad. For each P it prints one JSON line: the bytes allocated after the forward
above before it, per layer, against memsh's count per layer (q, k, v, output, fp32 logsumexp, and the padded
[P, ceil8(P)] copy when P % 8 != 0; the mask itself once), and the backend torch picked (the profiler's op names).
What a layer keeps beyond memsh_per_layer_without_pad should be memsh_pad_per_layer (give or take the efficient
kernel's logsumexp, whose rows it may round up to 32) if the copies are made and kept as the source says. Seconds on an H100 or H200, torch alone:

    python3 tools/oracle/cuda_pixtral_mask.py --out $OUT/pixtral_mask.jsonl

--device cpu --tiny is a smoke test (the CPU kernel reads the mask as it is: no copies)."""
import argparse
import json

import torch
import torch.nn.functional as F


def block_mask(sizes, dtype, device):
    p = sum(sizes)
    m = torch.full((p, p), torch.finfo(dtype).min, dtype=dtype, device=device)
    start = 0
    for n in sizes:
        m[start:start + n, start:start + n] = 0
        start += n
    return m[None, None, :, :].expand(1, 1, -1, -1)


def measure(sizes, layers, heads, hd, device):
    dtype = torch.bfloat16
    p = sum(sizes)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    alloc = torch.cuda.memory_allocated if device == "cuda" else (lambda: 0)
    mask = block_mask(sizes, dtype, device)
    x = torch.randn(1, heads, p, hd, dtype=dtype, device=device, requires_grad=True)
    sync()
    before = alloc()
    h = x
    kernels = set()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(layers):
            q, k, v = h * 1.0, h * 1.0, h * 1.0  # three fresh tensors a layer, as q/k/v projections make
            h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for e in prof.key_averages():
        if "attention" in e.key:
            kernels.add(e.key)
    sync()
    after = alloc()
    h.float().sum().backward()
    el = 2
    pad8 = -(-p // 8) * 8
    per_layer = 4 * heads * p * hd * el + 4 * heads * p  # q, k, v, output; fp32 logsumexp
    padded = p * pad8 * el if p % 8 else 0
    return {"sizes": sizes, "patches": p, "layers": layers, "device": device, "torch": torch.__version__,
            "kept_per_layer": (after - before) / layers, "memsh_per_layer_without_pad": per_layer,
            "memsh_pad_per_layer": padded, "mask_bytes": p * p * el, "ops": sorted(kernels)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    cases = [[36], [40], [36, 36]] if a.tiny else [[12100], [12104], [12100, 12100], [6820], [6824]]
    with open(a.out, "w") as f:
        for sizes in cases:
            rec = measure(sizes, 2 if a.tiny else 4, 4 if a.tiny else 16, 8 if a.tiny else 64, a.device)
            f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec))


if __name__ == "__main__":
    main()
