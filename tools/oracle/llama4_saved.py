# llama4_saved.py: what autograd saves in one training forward of a tiny
# Llama 4 text model (Llama4ForCausalLM, transformers 5.17.0, torch 2.15.0,
# fp32 on the CPU), for sim/llama4_oracle_test.go.
#
#   /work/venv-t/bin/python tools/oracle/llama4_saved.py sim/testdata/hf/llama4-tiny.json ATTN SEQ [BATCH] [-v] [-bf16]
#
# -bf16 casts the model to bfloat16 (memsh's precision "bf16").
# It runs one forward with labels = input_ids under saved_tensors_hooks and
# prints the bytes of the distinct storages saved for backward (parameters
# excluded); -v lists them by the module that saved them.
import collections
import json
import sys

import torch
import transformers
from transformers import Llama4ForCausalLM, Llama4TextConfig

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
attn, seq = sys.argv[2], int(sys.argv[3])
batch = int(sys.argv[4]) if len(sys.argv) > 4 and not sys.argv[4].startswith("-") else 1
verbose = "-v" in sys.argv
cfg = Llama4TextConfig(**{k: v for k, v in raw.items() if k != "architectures"})
cfg._attn_implementation = attn
model = Llama4ForCausalLM(cfg).train()
if "-bf16" in sys.argv:
    model = model.to(torch.bfloat16)
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
current = ["-"]
for name, mod in model.named_modules():
    mod.register_forward_pre_hook(lambda m, a, n=name: current.__setitem__(0, n))
saved = {}
by_module = collections.defaultdict(int)


def pack(t):
    s = t.untyped_storage()
    key = s.data_ptr()
    if key not in params and key not in saved:
        saved[key] = s.nbytes()
        by_module[current[0]] += s.nbytes()
        if verbose:
            print(f"  {current[0]:50s} {tuple(t.shape)} {t.dtype} {s.nbytes()}")
    return t


ids = torch.randint(0, cfg.vocab_size, (batch, seq))
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = model(input_ids=ids, labels=ids)
print("transformers", transformers.__version__, "torch", torch.__version__, "attn", attn, "seq", seq, "batch", batch)
print("saved", sum(saved.values()))
if verbose:
    for k, v in sorted(by_module.items()):
        print(f"{k:50s} {v}")
