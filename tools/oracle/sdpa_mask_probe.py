# sdpa_mask_probe.py: whether a transformers Llama hands SDPA a mask (and
# enable_gqa) in a training forward, by how the forward is called: labels
# or not, use_cache=False or the config's default. It wraps
# F.scaled_dot_product_attention and prints, per call pattern, the first
# layer's (attn_mask is not None, enable_gqa).
#
#   [PYTHONPATH=DIR] python sdpa_mask_probe.py CONFIG.json   # DIR: another release
#
# Found (session 31, torch 2.15.0, CPU, sim/testdata/hf/llama-gqa-tiny.json,
# 2 x 32 tokens): transformers 4.57.1 (the wheel unpacked on PYTHONPATH with
# requests and huggingface_hub 0.36.0) passes no mask and enable_gqa=True
# with the default use_cache, but a 4-D mask and enable_gqa=False (k and v
# expanded by repeat_kv) with use_cache=False, which gradient checkpointing
# forces and hf_block_saved.py's nocache passes; 5.25.0 passes no mask
# either way. memsh's gqaSince (4.54, sim/hf) assumes no mask whatever
# use_cache says: under 4.54-4.57 with use_cache=False it undercounted k
# and v's copies and the mask (12,288 B a layer for ernie4_5-tiny.json in
# bf16, sim/ernie4_5_moe_test.go). The cause: masking_utils'
# packed-sequence check (no attention_mask, no past_key_values), whose
# find_packed_sequence_indices returns a tensor even when nothing is
# packed, in the 4.54.0 to 4.57.6 wheels (none in 4.53.0; None from 5.0.0
# when nothing is packed); an attention_mask of ones skips it. Modelled:
# nn.Attention.NoCacheMask, sim/nocache_mask_test.go.
import json
import sys

import torch
import torch.nn.functional as F

import transformers

raw = json.load(open(sys.argv[1]))
orig = F.scaled_dot_product_attention
seen = []


def probe(*args, **kwargs):
    seen.append((kwargs.get("attn_mask") is not None, kwargs.get("enable_gqa", False)))
    return orig(*args, **kwargs)


F.scaled_dot_product_attention = probe
torch.manual_seed(0)
ids = torch.randint(1, raw["vocab_size"], (2, 32))
cfg = transformers.LlamaConfig(**{k: v for k, v in raw.items() if k != "architectures"})
cfg._attn_implementation = "sdpa"
model = transformers.LlamaForCausalLM(cfg).train()
print("transformers", transformers.__version__, "torch", torch.__version__)
for kwargs in [{}, {"labels": ids}, {"labels": ids, "use_cache": False}, {"use_cache": False}]:
    seen.clear()
    model(input_ids=ids, **kwargs)
    print(sorted(kwargs), "mask", seen[0][0], "enable_gqa", seen[0][1])
