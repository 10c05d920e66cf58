# cuda_mla_attn.py: prepared, not run (issue 19, moon29). Two of the places where the held-back
# Megatron-SWIFT Moonlight-16B-A3B pp 2 row (sim/calib_swift_moe_test.go: 9 s/it measured, memsh 3.91 s)
# may lose time that memsh does not price, measured so that they can be priced from a rate:
#
#  1. "attn": flash attention at head dim 192. ms-swift's _patch_mla_attention (swift/megatron/init.py
#     l.357-361 at cecf735f1) pads MLA's value from v_head_dim 128 to the q/k head dim 192 under packed
#     (thd) rows, because Transformer Engine runs no backend for head_dim_qk != head_dim_v on an A800
#     (flash-attn disabled for MLA in every TE release; cuDNN has no head dim > 128 before sm90, TE#1610;
#     the unfused path takes no thd). So FlashAttention-2 runs at head dim 192 for q, k and v. memsh prices
#     every flash kernel at one efficiency curve by sequence (timing/kernels.go attentionTime), measured at
#     head dim 128. PyTorch's FLASH_ATTENTION backend is FlashAttention-2's kernels; this times it causal at
#     [1, 16 heads, 8192, d] for d = 128 and 192, forward and forward+backward, and reports TFLOP/s: the
#     ratio of the two is what a head-dim term would need (measured on an H200, where these sm80 kernels
#     run as they are; the A800 ratio is not measured here).
#
#  2. "rope": Megatron-Core's unfused RoPE on packed rows. ms-swift sets no_rope_fusion for MLA
#     (megatron_args.py _init_no_rope_fusion at cecf735f1), so each MLA layer's forward (and its
#     recompute) calls megatron/core/models/common/embeddings/rope_utils.py _apply_rotary_pos_emb_thd
#     (core_v0.13.0 l.139-179) twice (q's and k's rope parts): a .tolist() of the document lengths (a host
#     sync, l.166), then a Python loop of about twenty aten ops per document. Copied below as it is there
#     (cp size 1, mscale 1, multi_latent_attention True). Timed with the device idle before each call
#     (what the sync leaves), host wall time per call and per document, for 1 to 32 documents in the row.
#
# Output: one JSON line per case. Under a minute on an H200, torch alone:
#   python3 tools/oracle/cuda_mla_attn.py --out $OUT/mla_attn.jsonl
# (not smoke-tested here: no torch on the CPU machine).
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--docs", default="1,2,4,8,16,32")
p.add_argument("--out", default="mla_attn.jsonl")
a = p.parse_args()
out = open(a.out, "w")


def emit(r):
    out.write(json.dumps(r) + "\n")
    out.flush()
    print(json.dumps(r))


def cuda_time(fn, warm=3, reps=10):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def attn(d):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    q, k, v = (torch.randn(1, a.heads, a.seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    go = torch.randn(1, a.heads, a.seq, d, device="cuda", dtype=torch.bfloat16)

    def fwd():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def fwdbwd():
        fwd().backward(go)

    tf, tb = cuda_time(fwd), cuda_time(fwdbwd)
    flops = 2 * a.heads * a.seq * (a.seq / 2) * (d + d)  # QK^T and PV over the causal half
    emit(dict(part="attn", backend="FLASH_ATTENTION", heads=a.heads, seq=a.seq, d=d, fwd_s=tf, fwd_bwd_s=tb,
              fwd_tflops=flops / tf / 1e12, fwd_bwd_tflops=3.5 * flops / tb / 1e12,
              note="fwd_bwd_tflops counts 3.5x the causal forward FLOPs (backward 2.5x, FA2 convention)"))


# Megatron-Core core_v0.13.0 rope_utils.py, unfused thd path (cp size 1), copied.
def _rotate_half(x):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _apply_rotary_pos_emb_bshd(t, freqs, mscale=1.0):
    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    x1 = t[..., 0::2]
    x2 = t[..., 1::2]
    t = torch.cat((x1, x2), dim=-1)
    cos_ = (torch.cos(freqs) * mscale).to(t.dtype)
    sin_ = (torch.sin(freqs) * mscale).to(t.dtype)
    t = (t * cos_) + (_rotate_half(t) * sin_)
    return torch.cat((t, t_pass), dim=-1)


def _apply_rotary_pos_emb_thd(t, cu_seqlens, freqs):
    seqlens = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    return torch.cat([_apply_rotary_pos_emb_bshd(x.unsqueeze(1), freqs[: x.size(0)])
                      for x in torch.split(t, seqlens)]).squeeze(1)


def rope(docs, heads):
    t = torch.randn(a.seq, heads, 64, device="cuda", dtype=torch.bfloat16)
    freqs = torch.randn(a.seq, 1, 1, 64, device="cuda", dtype=torch.float32)
    bounds = [round(i * a.seq / docs) for i in range(docs + 1)]
    cu = torch.tensor(bounds, device="cuda", dtype=torch.int32)
    for _ in range(3):
        _apply_rotary_pos_emb_thd(t, cu, freqs)
    walls = []
    for _ in range(10):
        torch.cuda.synchronize()
        w = time.perf_counter()
        _apply_rotary_pos_emb_thd(t, cu, freqs)
        walls.append(time.perf_counter() - w)
    walls.sort()
    gpu = cuda_time(lambda: _apply_rotary_pos_emb_thd(t, cu, freqs))
    host = walls[len(walls) // 2]
    emit(dict(part="rope", docs=docs, heads=heads, seq=a.seq, host_s=host, host_per_doc_s=host / docs,
              span_s=gpu, note="host_s: wall time of one call from an idle device (the .tolist() sync first); span_s: the device span of a call from CUDA events, idle gaps included"))


attn(128)
attn(192)
for n in [int(x) for x in a.docs.split(",")]:
    rope(n, a.heads)  # q's rope part [t, 16, 64]
    rope(n, 1)  # k's shared rope key [t, 1, 64]
