# gqa_sdpa.py: what autograd saves for a tiny Llama with grouped-query
# attention under transformers' SDPA, with and without enable_gqa
# (transformers 4.57.1, torch 2.15, fp32, on the CPU), for
# sim/gqa_sdpa_test.go.
#
#   pip install --target /tmp/tf457 transformers==4.57.1 requests
#   python gqa_sdpa.py ../../sim/testdata/hf/llama-gqa-tiny.json SEQ BATCH
#
# transformers >= 4.54 (integrations/sdpa_attention.py, use_gqa_in_sdpa)
# passes enable_gqa=True to torch's scaled_dot_product_attention when torch
# is at least 2.5 and no attention mask is passed (training without padding:
# is_causal); older versions always expand k and v with repeat_kv. The
# script runs one training forward (labels = input_ids, no attention_mask)
# twice: as 4.57.1 runs it, then with use_gqa_in_sdpa forced False (the
# repeat_kv path of transformers <= 4.53), and prints the bytes of the
# distinct storages saved for backward (parameters excluded) in each.
import collections
import json
import sys

import torch

sys.path.insert(0, "/tmp/tf457")
import transformers  # noqa: E402
import transformers.integrations.sdpa_attention as sdpa  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
seq, batch = int(sys.argv[2]), int(sys.argv[3])
cfg = LlamaConfig(**raw)
cfg._attn_implementation = "sdpa"
model = LlamaForCausalLM(cfg).train()
print("transformers", transformers.__version__, "torch", torch.__version__)
print("params", sum(p.numel() for p in model.parameters()))
ids = torch.tensor([[10 + (i * 7 + b) % 200 for i in range(seq)] for b in range(batch)])
params = {p.data_ptr() for p in model.parameters()}


def saved_bytes():
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
    model.zero_grad()
    return sum(v[2] for v in saved.values()), saved


native, s1 = saved_bytes()
sdpa.use_gqa_in_sdpa = lambda *a, **k: False
repeat, s0 = saved_bytes()
if "-r" in sys.argv:
    for v in s0.values():
        print(v)
print("saved with enable_gqa", native, "with repeat_kv", repeat, "repeat_kv adds", repeat - native)
if "-v" in sys.argv:
    for v in s1.values():
        print(v)
