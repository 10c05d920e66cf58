# v4_indexer.py: the transient memory of DeepSeek-V4's lightning indexer
# (DeepseekV4Indexer, transformers 5.25.0, torch 2.15, eager, CPU) in a
# training forward, for sim/hfconfig_dsv4_test.go.
#
#   /work/venv-t/bin/python v4_indexer.py CONFIG LAYERS BATCH SEQ DTYPE [v]
#
# CONFIG is a deepseek_v4 config.json (sim/testdata/hf/deepseek-v4-tiny.json),
# built with num_hidden_layers = LAYERS (layer_types and mlp_layer_types
# cut alike) and loaded in DTYPE as from_pretrained loads it (the
# _keep_in_fp32_modules_strict modules in fp32). One forward (labels =
# input_ids) of BATCH samples of SEQ tokens and a backward. It prints, for
# each indexer call, indexer_peak: the most bytes of storages made inside
# it that were alive at once (dsa_indexer.py's TorchDispatchMode that
# follows each new output storage until it is freed; the call's arguments
# and the parameters not counted) and left: those alive when it returns
# (its result). The indexer runs with autograd on (no torch.no_grad: its
# top-k indices take no gradient), so what its ops save lives until it
# returns. With v, the storages live at the peak.
import json
import sys
import tempfile

import torch

import transformers

from live_storage import Live

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
layers, batch, seq, dtype = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), getattr(torch, sys.argv[5])
verbose = len(sys.argv) > 6
cls = getattr(transformers, raw["architectures"][0])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
cfg.num_hidden_layers = layers
for key in ("layer_types", "mlp_layer_types"):
    setattr(cfg, key, getattr(cfg, key)[:layers])
cfg._attn_implementation = "eager"
with tempfile.TemporaryDirectory() as d:
    cls(cfg).save_pretrained(d)
    model = cls.from_pretrained(d, dtype=dtype, attn_implementation="eager").train()
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
ids = torch.randint(1, raw["vocab_size"], (batch, seq))


runs = []


def pre(mod, args, kwargs):
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    mod._live = Live(params, {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)})
    mod._live.__enter__()


def post(mod, args, kwargs, out):
    mod._live.__exit__(None, None, None)
    runs.append(mod._live)


for m in model.modules():
    if type(m).__name__ == "DeepseekV4Indexer":
        m.register_forward_pre_hook(pre, with_kwargs=True)
        m.register_forward_hook(post, with_kwargs=True, always_call=True)

loss = model(input_ids=ids, labels=ids, use_cache=False).loss  # training: no cache (its overlap state is not made)
loss.backward()
print("transformers", transformers.__version__, "torch", torch.__version__)
for live in runs:
    print("indexer_peak", live.peak, "left", live.live)
    if verbose:
        for v in live.at_peak:
            print("   live at the peak:", *v)
