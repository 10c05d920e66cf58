# cuda_flex.py: compiled FlexAttention on one GPU, as torchtitan runs it
# (block_causal: causal AND packed documents, enable_gqa), against
# flash-attn's kernel through SDPA, for sim/nn/flex_attention.go and
# flex_blocks.go. Not run yet: a prepared device check.
#
#   python cuda_flex.py > flex.jsonl      (about 2 minutes on an H200)
#
# For each row (tokens, documents of L tokens or one causal row): the
# bytes saved for backward (saved_tensors_hooks), the peak allocated above
# q, k, v and the output in forward and backward (what memsh calls WorkF
# and WorkB plus the input gradients), the BlockMask's blocks run (kv and
# full kv block counts), and forward and backward milliseconds (median of
# 20 after 5 warm-up steps). Llama-3-8B's attention: 32 heads, 8 kv heads
# of 128, bf16.
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention

H, KV, D = 32, 8, 128
flex = torch.compile(flex_attention)


def timed(fn, n=20):
    for _ in range(5):
        fn()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[n // 2]


def row(T, L, kind):
    q = torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, KV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, KV, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = {"kind": kind, "tokens": T, "doc_tokens": L}
    if kind == "flex":
        pos = (torch.arange(T, device="cuda") + (37 if L else 0)) % (L or T)  # documents at an offset off the blocks
        doc = torch.cumsum((pos == 0).int(), 0) - 1
        bm = create_block_mask(and_masks(lambda b, h, i, j: i >= j, lambda b, h, i, j: doc[i] == doc[j]), 1, None, T, T, device="cuda")
        out["blocks"] = int(bm.kv_num_blocks.sum() + bm.full_kv_num_blocks.sum())
        out["causal_blocks"] = (T // 128) * (T // 128 + 1) // 2
        fwd = lambda: flex(q, k, v, block_mask=bm, enable_gqa=True)
    else:
        def fwd():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel() * t.element_size()) or t, lambda t: t):
        o = fwd()
    out["saved_bytes"] = sum(saved)
    g = torch.randn_like(o)
    del o, saved
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    o = fwd()
    out["fwd_peak_above"] = torch.cuda.max_memory_allocated() - base
    torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    o.backward(g)
    out["bwd_peak_above"] = torch.cuda.max_memory_allocated() - base
    out["fwd_ms"] = timed(lambda: fwd())
    out["fwdbwd_ms"] = timed(lambda: fwd().backward(g))
    print(json.dumps(out), flush=True)


for T in (8192, 32768):
    row(T, None, "flash")
    for L in (None, 2048, 512):
        row(T, L, "flex")
