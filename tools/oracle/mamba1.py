# mamba1.py: what autograd saves in transformers' MambaForCausalLM trained
# without the mamba_ssm kernels (MambaMixer.slow_forward until 5.14,
# mamba_selective_scan from 5.15: the path transformers takes on the CPU
# or when mamba_ssm and causal_conv1d are not installed), for
# sim/mamba1_test.go.
#
#   pip install --target /tmp/tf457 transformers==4.57.1 requests
#   python mamba1.py ../../sim/testdata/hf/mamba-tiny.json LAYERS BATCH SEQ DTYPE [v]
#   PYTHONPATH=DIR python mamba1.py ...   # DIR: another release (pip install --target DIR --no-deps)
#
# It counts the parameters on the meta device (the config's own layers),
# then, with num_hidden_layers = LAYERS, runs one training
# forward (labels = input_ids) of BATCH samples of SEQ tokens with the model
# in DTYPE (float32 or bfloat16, no autocast) and prints the bytes of the
# distinct storages saved for backward (parameters excluded): "saved",
# every storage autograd packed, and "kept", those some autograd node
# still holds when backward starts (5.25's MambaMixer.forward saves an
# exp(A_log) on a branch the loss does not reach: packed, then freed
# with the forward). With v, each storage: shape, dtype, bytes, grad_fn.
import collections
import gc
import json
import sys
import weakref

import torch

sys.path.insert(0, "/tmp/tf457")
import transformers  # noqa: E402
from transformers import MambaConfig, MambaForCausalLM  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
layers, batch, seq, dtype = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), getattr(torch, sys.argv[5])
cfg = MambaConfig(**raw)
with torch.device("meta"):
    meta = MambaForCausalLM(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__)
print("params", sum(p.numel() for p in meta.parameters()))
cfg.num_hidden_layers = layers
model = MambaForCausalLM(cfg).to(dtype).train()
ids = torch.randint(1, raw["vocab_size"], (batch, seq))
params = {p.data_ptr() for p in model.parameters()}
saved = collections.OrderedDict()
alive, hold = {}, []


class Box:
    def __init__(self, t):
        self.t = t


def pack(t):
    if t.data_ptr() not in params:
        key = t.untyped_storage().data_ptr()
        if key not in saved:
            saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
    # The packed object holds a detached alias: packing t itself would tie
    # a saved output to its own grad_fn in a cycle no collector frees, and
    # keep alive what backward would never read.
    # hold keeps each storage allocated, so that no later one takes its
    # address; a box lives as long as the autograd node that saved it.
    box = Box(t.detach())
    hold.append(t.untyped_storage())
    alive.setdefault(t.untyped_storage().data_ptr(), []).append(weakref.ref(box))
    return box


with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.t):
    out = model(input_ids=ids, labels=ids)
gc.collect()
# kept: the storages some autograd node still holds when backward starts
# (a tensor saved on a branch the loss does not reach dies with the forward).
kept = sum(v[2] for k, v in saved.items() if any(r() is not None for r in alive[k]))
out.loss.backward()
print("layers", layers, "batch", batch, "seq", seq, "dtype", sys.argv[5], "saved", sum(v[2] for v in saved.values()), "kept", kept)
if len(sys.argv) > 6:
    for v in saved.values():
        print(v)
