# trl_sft_head.py: what autograd keeps for backward in one training step of
# a transformers causal LM under TRL's fused LM head as SFTTrainer runs it
# (add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
# and SFTTrainer.compute_loss's loss: -log_probs summed over the batch and
# divided by label_mask.sum()), against the model's own loss, for
# sim/trl_sft_oracle_test.go.
#
#   python trl_sft_head.py CONFIG.json LAYERS BATCH SEQ DTYPE ATTN [prompt=K] [plain]
#
# On a device without Triton (the CPU) add_fused_lm_head scores every
# position (hidden_states.reshape(-1, H), labels clamped, masked_fill);
# on CUDA it scores only the positions whose label is not -100
# (hidden_states[mask], labels[mask], masked_scatter: "compact"). memsh
# models the CUDA path, so this harness makes trl.trainer.utils'
# _use_triton answer True for the compact branch; the tiles are folded by
# chunked_logprob's torch path (its own _use_triton is left alone), whose
# temporaries differ from the Triton kernel's but whose saved tensors
# (ctx.save_for_backward(hidden, weight, bias, targets, log_z, entropy))
# are the same. prompt=K sets the first K labels of every row to -100 (a
# completion-only loss); plain runs the model's own loss (labels=ids) for
# comparison. It prints the bytes of the distinct storages autograd packed
# (parameters excluded), "saved", and of those some node still holds when
# the backward starts, "kept" (the method of hf_block_saved.py).
# Model built as hf_block_saved.py builds it: the config's
# architectures[0], num_hidden_layers = LAYERS, cls(cfg).to(DTYPE),
# use_cache=False. /work/venv-t: torch 2.15.0, transformers 5.25.0,
# trl 1.16.0, CPU.
import gc
import json
import sys
import weakref

import torch
import transformers
import trl
import trl.trainer.utils as trl_utils

path, layers, batch, seq, dtype, attn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
opts = sys.argv[7:]
prompt = 0
for o in opts:
    if o.startswith("prompt="):
        prompt = int(o.split("=", 1)[1])
plain = "plain" in opts
raw = json.load(open(path))
raw["num_hidden_layers"] = layers
cfg = transformers.AutoConfig.for_model(**raw)
cfg._attn_implementation = attn
cls = getattr(transformers, raw["architectures"][0])
torch.manual_seed(0)
model = cls(cfg).to(getattr(torch, dtype))
model.train()
if not plain:
    trl_utils._use_triton = lambda device: True  # the compact branch, as on CUDA
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
ids = torch.randint(1, raw["vocab_size"], (batch, seq))
labels = ids.clone()
labels[:, :prompt] = -100
params = {p.data_ptr() for p in model.parameters()}
saved, alive, hold = {}, {}, []


class Box:
    def __init__(self, t):
        self.t = t


def pack(t):
    key = t.untyped_storage().data_ptr()
    if t.data_ptr() not in params and key not in saved:
        saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
    box = Box(t.detach())
    hold.append(t.untyped_storage())
    alive.setdefault(key, []).append(weakref.ref(box))
    return box


with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.t):
    if plain:
        loss = model(input_ids=ids, labels=labels, use_cache=False).loss
    else:
        out = model(input_ids=ids, labels=labels, use_cache=False, fused_lm_head=True)
        loss = (-out.log_probs).sum() / torch.as_tensor(out.label_mask.sum()).clamp(min=1)
        # the metrics SFTTrainer reads, no gradient
        metrics = (out.entropy.detach().sum(), out.is_top1.sum())
        del out
gc.collect()
live = {k for k in saved if any(r() is not None for r in alive[k])}
loss.backward()
print("transformers", transformers.__version__, "torch", torch.__version__, "trl", trl.__version__, "class", cls.__name__, "attn", attn)
print("layers", layers, "batch", batch, "seq", seq, "dtype", dtype, "prompt", prompt, "plain" if plain else "fused",
      "saved", sum(v[2] for v in saved.values()), "kept", sum(v[2] for k, v in saved.items() if k in live))
if "v" in opts:
    for k, v in saved.items():
        print(v, k in live)
