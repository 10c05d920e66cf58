# mamba_residual.py: what residual_in_fp32 changes in what autograd saves
# for transformers' MambaForCausalLM in bf16 (transformers 4.57.1, torch
# 2.15, the CPU: slow_forward), for sim/mamba_residual_test.go.
#
#   pip install --target /tmp/tf457 transformers==4.57.1 requests
#   python mamba_residual.py ../../sim/testdata/hf/mamba-tiny.json LAYERS BATCH SEQ CKPT
#
# With num_hidden_layers = LAYERS, one training forward (labels = input_ids)
# of BATCH samples of SEQ tokens in bf16 (no autocast), with gradient
# checkpointing when CKPT is 1 (model.gradient_checkpointing_enable(),
# non-reentrant), twice: residual_in_fp32 False and True. It prints the
# bytes of the distinct storages saved for backward (parameters excluded)
# in each and their difference.
import collections
import json
import sys

import torch

sys.path.insert(0, "/tmp/tf457")
import transformers  # noqa: E402
from transformers import MambaConfig, MambaForCausalLM  # noqa: E402

torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
layers, batch, seq, ckpt = (int(a) for a in sys.argv[2:6])
print("transformers", transformers.__version__, "torch", torch.__version__)


def saved_bytes(fp32):
    torch.manual_seed(0)
    cfg = MambaConfig(**dict(raw, num_hidden_layers=layers, residual_in_fp32=fp32))
    model = MambaForCausalLM(cfg).to(torch.bfloat16).train()
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(1, raw["vocab_size"], (batch, seq))
    params = {p.data_ptr() for p in model.parameters()}
    saved = collections.OrderedDict()

    def pack(t):
        if t.data_ptr() not in params:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return sum(v[2] for v in saved.values())


off, on = saved_bytes(False), saved_bytes(True)
print("layers", layers, "batch", batch, "seq", seq, "ckpt", ckpt, "saved", off, "with residual_in_fp32", on, "difference", on - off)
