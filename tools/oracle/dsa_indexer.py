# dsa_indexer.py: what DeepSeek Sparse Attention costs in training as
# transformers runs it (DeepseekV32ForCausalLM, transformers 5.17.0,
# torch 2.15, sdpa, CPU), for sim/hfconfig_dsa_test.go.
#
#   /work/venv-t/bin/python dsa_indexer.py CONFIG LAYERS BATCH SEQ DTYPE [v]
#
# CONFIG is a deepseek_v32 config.json (sim/testdata/hf/deepseek-v3.2.json);
# its parameters are counted on the meta device. Then a small model of the
# same family (the sizes in SMALL below, num_hidden_layers = LAYERS, in
# DTYPE: float32 or bfloat16, no autocast) runs one training forward of
# BATCH samples of SEQ tokens (labels = input_ids) and a backward, and it
# prints:
#   - saved: the distinct storages autograd saves during the forward
#     (parameters excluded), in total and those saved inside the indexer
#     (saved_tensors_hooks; the indexer runs under no_grad, so none);
#   - grads: which indexer parameters have a .grad after backward;
#   - indexer_peak: the most bytes of tensors made inside one indexer
#     forward that were alive at once (a TorchDispatchMode that follows
#     each new output storage until it is freed; the forward's arguments
#     and the parameters are not counted), and the bytes still alive when
#     it returns (its result); with v, the storages live at that peak;
#   - saved_masks: the saved storages of [.., SEQ, SEQ] shape (on the CPU
#     SDPA with a mask runs its math path, which saves the fp32 attention
#     weights; CUDA's efficient kernel saves the bias instead: not measured
#     here).
# With v, every storage saved, with its shape and dtype.
import collections
import json
import sys

import torch

import transformers

from live_storage import Live
from transformers import AutoConfig, AutoModelForCausalLM

SMALL = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=64, first_k_dense_replace=1,
             n_routed_experts=8, n_group=1, topk_group=1, num_experts_per_tok=2, num_attention_heads=4,
             num_key_value_heads=4, q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16,
             v_head_dim=32, vocab_size=1024, index_n_heads=8, index_head_dim=32, index_topk=16)

torch.manual_seed(0)
torch.set_num_threads(2)
raw = json.load(open(sys.argv[1]))
raw.pop("quantization_config", None)
layers, batch, seq, dtype = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), getattr(torch, sys.argv[5])
verbose = len(sys.argv) > 6
cfg = AutoConfig.for_model(**raw)
with torch.device("meta"):
    meta = AutoModelForCausalLM.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__)
print("params", sum(p.numel() for p in meta.parameters()))
del meta

small = dict(raw, **SMALL, num_hidden_layers=layers)
cfg = AutoConfig.for_model(**small)
cfg._attn_implementation = "sdpa"
model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").to(dtype).train()
ids = torch.randint(1, small["vocab_size"], (batch, seq))
params = {p.untyped_storage().data_ptr() for p in model.parameters()}


saved = collections.OrderedDict()
where = ["trunk"]


def pack(t):
    s = t.untyped_storage()
    key = s.data_ptr()
    if key not in params and key not in saved:
        saved[key] = (s.nbytes(), tuple(t.shape), str(t.dtype), where[0])
    return t


indexer_runs = []


def pre(mod, args, kwargs):
    where[0] = "indexer"
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    mod._live = Live(params, {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)})
    mod._live.__enter__()


def post(mod, args, kwargs, out):
    live = mod._live
    live.__exit__(None, None, None)
    indexer_runs.append((live.peak, live.live, live.at_peak))
    where[0] = "trunk"


for m in model.modules():
    if type(m).__name__.endswith("Indexer"):
        m.register_forward_pre_hook(pre, with_kwargs=True)
        m.register_forward_hook(post, with_kwargs=True)

with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    loss = model(input_ids=ids, labels=ids).loss
loss.backward()

total = sum(v[0] for v in saved.values())
inside = sum(v[0] for v in saved.values() if v[3] == "indexer")
print("saved", total, "indexer_saved", inside)
bias = [v for v in saved.values() if len(v[1]) == 4 and v[1][-1] == seq and v[1][-2] == seq]
print("saved_masks", [(v[0], v[1], v[2]) for v in bias])
grads = {n: p.grad is not None for n, p in model.named_parameters() if ".indexer." in n}
print("indexer_grads", sum(grads.values()), "of", len(grads))
for peak, left, at in indexer_runs:
    print("indexer_peak", peak, "left", left)
    if verbose:
        for v in at:
            print("   live at the peak:", *v)
if verbose:
    for n, shape, dt, w in saved.values():
        print(" ", n, shape, dt, w)
