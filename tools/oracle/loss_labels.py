# loss_labels.py: what a transformers causal LM's loss allocates for the
# labels in one training step (ForCausalLMLoss in loss/loss_utils.py:
# nn.functional.pad(labels, (0, 1), value=ignore_index), then
# labels[..., 1:].contiguous()), and when each storage is freed: during the
# forward, held by autograd until the backward, or never (the caller's).
#
#   python loss_labels.py CONFIG.json BATCH SEQ [token_types]
#   e.g. python loss_labels.py ../../sim/testdata/hf/llama-gqa-tiny.json 2 16
#
# Every int64 storage the step makes is listed, the model's own too (the
# rotary positions' arange; BERT's token types: with token_types the batch
# carries token_type_ids, zeros [BATCH, SEQ] as BertTokenizer makes them,
# without it the model makes its own from its buffer).
#
# A TorchDispatchMode sees every new storage an aten op makes while the model
# runs model(input_ids, labels=labels) (one decoder layer, fp32, CPU) and
# its backward; a weakref finalizer says when each int64 storage dies.
# saved_tensors_hooks names the storages autograd packed. One JSON line:
# each int64 storage the step made (op, shape, bytes, saved, the phase it
# was freed in: "forward", "backward" or "after": alive when the backward
# returned).
import json
import sys
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import transformers

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
batch, seq = int(sys.argv[2]), int(sys.argv[3])
token_types = "token_types" in sys.argv[4:]
cls = getattr(transformers, raw["architectures"][0])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
cfg.num_hidden_layers = 1
cfg._attn_implementation = "sdpa"
model = cls(cfg).train()
ids = torch.randint(1, raw["vocab_size"], (batch, seq))
labels = ids.clone()
type_ids = torch.zeros(batch, seq, dtype=torch.long) if token_types else None
kwargs = {"token_type_ids": type_ids} if token_types else {}
# storages made before the step (the batch, parameters, buffers): a view of one is no new storage
given = {x.untyped_storage().data_ptr() for x in (ids, labels, type_ids) if x is not None}
given |= {x.untyped_storage().data_ptr() for x in list(model.parameters()) + list(model.buffers())}
phase = ["forward"]
made = {}  # storage ptr -> record


class Storages(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.dtype != torch.int64:
                continue
            s = t.untyped_storage()
            key = s.data_ptr()
            if key in made or key in given or s.nbytes() == 0:
                continue
            rec = {"op": str(func.overloadpacket.__name__), "shape": list(t.shape), "bytes": s.nbytes(),
                   "made": phase[0], "saved": False, "freed": None}
            made[key] = rec
            weakref.finalize(s, lambda r=rec: r.__setitem__("freed", r["freed"] or phase[0]))
        return out


def pack(t):
    if t.dtype == torch.int64:
        rec = made.get(t.untyped_storage().data_ptr())
        if rec is not None:
            rec["saved"] = True
    return t


records = []
with Storages(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = model(input_ids=ids, labels=labels, **kwargs)
    records = list(made.values())
    phase[0] = "backward"
    out.loss.backward()
    phase[0] = "after"
for r in records:
    r["freed"] = r["freed"] or "after"
print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0],
                  "batch": batch, "seq": seq, "token_types": token_types, "int64": records}))
