"""The parameters transformers' vision-language models hold under each top-level module (model.vision_tower,
model.multi_modal_projector, model.language_model, lm_head, ...), built from the tiny configs in sim/testdata/hf on the
meta device: one JSON line per config, named_parameters() (each tensor once) summed by its name's first two components
under "model." (a parameter of model's own, model.image_newline, by its name), else its first. sim/describe_test.go
holds model.describe()'s rows to them.

    nice -n 10 /work/venv-t/bin/python tools/oracle/hf_module_params.py   # transformers 5.25.0, torch 2.15.0

Kimi K2.5 (trust_remote_code, not a transformers class) is left out."""
import json
import os
import sys

import torch
import transformers

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")


def module(name):
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "model" else parts[0]


for config in sys.argv[1:]:
    raw = json.load(open(os.path.join(HF, config)))
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = getattr(transformers, raw["architectures"][0])(cfg)
    sums = {}
    for n, p in model.named_parameters():
        sums[module(n)] = sums.get(module(n), 0) + p.numel()
    print(json.dumps({"config": config, "modules": sums, "transformers": transformers.__version__}))
