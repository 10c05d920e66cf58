# packed_rows.py: what autograd keeps for backward in one training step of
# a transformers model fed one packed row (DataCollatorWithFlattening,
# TRL's padding_free): documents of the given lengths back to back in
# input_ids [1, total], position_ids restarting at 0 for each document, no
# attention_mask (fp32 or bf16 weights, no autocast, on the CPU). With
# "unpacked" the same tokens as one causal row (position_ids 0..total-1),
# for the difference.
#
#   python packed_rows.py CONFIG.json LAYERS DTYPE ATTN LENGTHS [unpacked] [ckpt]
#   e.g. python packed_rows.py ../../sim/testdata/hf/llama-gqa-tiny.json 2 float32 sdpa 16,16 ckpt
#
# It prints the bytes of the distinct storages autograd packed (parameters
# excluded) and, under ckpt (every decoder layer checkpointed,
# use_reentrant=False), "held": the storages handed to the decoder layers
# that live after the forward and that autograd did not pack (the mask,
# the rotary pair, position_ids), as hf_block_saved.py counts them; and
# the mask each layer got (shape, dtype) from a forward pre-hook.
import json
import sys
import weakref

import torch

import transformers

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
layers, dtype, attn = int(sys.argv[2]), getattr(torch, sys.argv[3]), sys.argv[4]
lengths = [int(x) for x in sys.argv[5].split(",")]
flags = sys.argv[6:]
cls = getattr(transformers, raw["architectures"][0])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
cfg.num_hidden_layers = layers
cfg._attn_implementation = attn
model = cls(cfg).to(dtype).train()
if "ckpt" in flags:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
total = sum(lengths)
ids = torch.randint(1, raw["vocab_size"], (1, total))
if "unpacked" in flags:
    pos = torch.arange(total).unsqueeze(0)
else:
    pos = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
labels = ids.clone()
params = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
saved, hold, seen, masks = {}, [], {}, []


def pack(t):
    key = t.untyped_storage().data_ptr()
    if t.data_ptr() not in params and key not in saved:
        saved[key] = t.untyped_storage().nbytes()
    hold.append(t.untyped_storage())
    return t.detach()


def note(module, args, kwargs):
    m = kwargs.get("attention_mask")
    masks.append(None if m is None else (tuple(m.shape), str(m.dtype)))
    for t in list(args) + list(kwargs.values()):
        for x in (t if isinstance(t, (tuple, list)) else [t]):
            if isinstance(x, torch.Tensor) and x.data_ptr() not in params:
                seen.setdefault(x.untyped_storage().data_ptr(), (x.untyped_storage().nbytes(), []))[1].append(weakref.ref(x))


decoder = [m for n, m in model.named_modules() if n.endswith("layers") and isinstance(m, torch.nn.ModuleList)][0]
for layer in decoder:
    layer.register_forward_pre_hook(note, with_kwargs=True)
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = model(input_ids=ids, labels=labels, position_ids=pos, use_cache=False)
held = sum(n for k, (n, refs) in seen.items() if k not in saved and any(r() is not None for r in refs))
print("transformers", transformers.__version__, "torch", torch.__version__, "attn", attn, "dtype", sys.argv[3],
      "layers", layers, "lengths", sys.argv[5], "unpacked" if "unpacked" in flags else "packed", "ckpt" if "ckpt" in flags else "")
print("saved", sum(saved.values()), "held", held if "ckpt" in flags else 0, "mask", masks[0])
