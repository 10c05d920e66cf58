"""What one Gated DeltaNet layer saves for backward in transformers' torch path
(torch_chunk_gated_delta_rule, the F.conv1d fallback of causal_conv1d_fn, Qwen3NextRMSNormGated in
torch ops): Qwen3NextGatedDeltaNet ("next") and Qwen3_5GatedDeltaNet ("q35") built alone in bf16
on the CPU, one sequence, storages deduplicated, parameters and the input excluded.

    /work/venv-t/bin/python tools/oracle/gdn_saved.py          # torch 2.15.0, transformers 5.17.0
    /work/venv-t/bin/python tools/oracle/gdn_saved.py -v       # with each saved storage
    /work/venv-t/bin/python tools/oracle/gdn_saved.py --attn   # Qwen3NextAttention (gated), eager

--attn measures the gated full-attention layer instead: Qwen3NextAttention in bf16, eager, with its
rotary tables (excluded, as the input and the parameters are).

flash-linear-attention and causal-conv1d must NOT be installed (transformers would pick them; they need
a GPU). One JSON line per case; the figures are in sim/gated_deltanet_test.go."""
import json
import sys

import torch
import transformers
from transformers.models.qwen3_5 import modeling_qwen3_5 as m35
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_next import modeling_qwen3_next as mn
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

CASES = [  # family, hidden, key heads, value heads, key head dim, value head dim, tokens
    ("next", 256, 2, 4, 32, 32, 128), ("next", 256, 2, 4, 32, 32, 200), ("next", 256, 2, 2, 32, 64, 256),
    ("next", 192, 3, 3, 16, 48, 100), ("q35", 256, 2, 4, 32, 32, 128), ("q35", 256, 2, 4, 32, 32, 200),
    ("q35", 128, 1, 4, 64, 32, 300),
]


def measure(family, hidden, hk, hv, dk, dv, T):
    kw = dict(hidden_size=hidden, linear_num_key_heads=hk, linear_num_value_heads=hv, linear_key_head_dim=dk,
              linear_value_head_dim=dv, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
              head_dim=64, vocab_size=128, layer_types=["linear_attention"])
    if family == "next":
        mod = mn.Qwen3NextGatedDeltaNet(Qwen3NextConfig(**kw), 0)
    else:
        mod = m35.Qwen3_5GatedDeltaNet(Qwen3_5TextConfig(**kw), 0)
    mod = mod.to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in mod.parameters()}
    x = torch.randn(1, T, hidden, dtype=torch.bfloat16, requires_grad=True)
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.data_ptr() != x.untyped_storage().data_ptr():
            seen[s.data_ptr()] = (s.nbytes(), str(t.dtype), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = mod(x)
    y.float().sum().backward()
    return {"family": family, "hidden": hidden, "hk": hk, "hv": hv, "dk": dk, "dv": dv, "T": T,
            "saved_bytes": sum(v[0] for v in seen.values()), "storages": len(seen)}, seen


ATTN_CASES = [(256, 4, 2, 64, 128), (256, 4, 1, 32, 64)]  # hidden, heads, kv heads, head dim, tokens


def measure_attn(hidden, h, kv, d, T):
    cfg = Qwen3NextConfig(hidden_size=hidden, num_attention_heads=h, num_key_value_heads=kv, head_dim=d,
                          num_hidden_layers=1, vocab_size=128, layer_types=["full_attention"])
    cfg._attn_implementation = "eager"
    mod = mn.Qwen3NextAttention(cfg, 0).to(torch.bfloat16)
    x = torch.randn(1, T, hidden, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = mn.Qwen3NextRotaryEmbedding(cfg)(x, torch.arange(T)[None])
    excl = {p.untyped_storage().data_ptr() for p in mod.parameters()}
    excl |= {t.untyped_storage().data_ptr() for t in (x, cos, sin)}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in excl:
            seen[s.data_ptr()] = (s.nbytes(), str(t.dtype), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y, _ = mod(x, (cos, sin), None)
    y.float().sum().backward()
    return {"layer": "Qwen3NextAttention", "hidden": hidden, "heads": h, "kv_heads": kv, "head_dim": d, "T": T,
            "saved_bytes": sum(v[0] for v in seen.values()), "storages": len(seen)}, seen


if __name__ == "__main__":
    print("torch", torch.__version__, "transformers", transformers.__version__, file=sys.stderr)
    attn = "--attn" in sys.argv
    for case in ATTN_CASES if attn else CASES:
        row, seen = measure_attn(*case) if attn else measure(*case)
        print(json.dumps(row))
        if "-v" in sys.argv:
            for v in sorted(seen.values(), key=lambda v: -v[0]):
                print("   ", v)
