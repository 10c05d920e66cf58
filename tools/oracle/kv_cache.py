# kv_cache.py: what use_cache=True adds to a training step of a
# transformers model built from a config.json (bf16 weights, no autocast,
# on the CPU): the DynamicCache's k and v (torch.cat copies) beside what
# autograd saves, for sim/kv_cache_test.go.
#
#   python kv_cache.py CONFIG.json LAYERS BATCH SEQ ATTN [mask]
#
# One forward with use_cache=False and one with use_cache=True (labels =
# input_ids): the bytes of the distinct storages autograd packed
# (parameters excluded), the bytes of the cache's storages
# (out.past_key_values), and of those the bytes no saved storage shares:
# what the cache adds while the model's output lives.
import gc
import json
import sys

import torch
import transformers

torch.manual_seed(0)
raw = json.load(open(sys.argv[1]))
layers, batch, seq, attn = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
cls = getattr(transformers, raw["architectures"][0])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
cfg.num_hidden_layers = layers
cfg._attn_implementation = attn
model = cls(cfg).to(torch.bfloat16).train()
ids = torch.randint(1, raw["vocab_size"], (batch, seq))
mask = torch.ones_like(ids) if "mask" in sys.argv[6:] else None
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
for use in (False, True):
    saved, hold = {}, []

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params:
            saved[key] = t.untyped_storage().nbytes()
        hold.append(t)  # keeps each storage allocated: no later one takes its address
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids, attention_mask=mask, use_cache=use)
    cache = out.past_key_values
    held = besides = 0
    if cache is not None:
        for layer in cache.layers:
            for t in (layer.keys, layer.values):
                n = t.untyped_storage().nbytes()
                held += n
                if t.untyped_storage().data_ptr() not in saved:
                    besides += n
    print(f"use_cache={use}: saved {sum(saved.values())} B; the cache holds {held} B, {besides} B of them no saved tensor's")
    out.loss.backward()
    model.zero_grad(set_to_none=True)
    del out, cache, hold
    gc.collect()
print("transformers", transformers.__version__, "torch", torch.__version__, cls.__name__, attn, "layers", layers, "batch", batch, "seq", seq)
