"""The module tree of the encoders, GPT-2, GPT-NeoX, OPT, BLOOM, Falcon and Llama 4 as transformers builds them from
configs in sim/testdata/hf (tiny ones, and the small published OPT-125M, BLOOM-560M, Pythia-160M), one JSON line per
model class: named_parameters() (each distinct tensor once, with its element count), the other names a tied tensor answers to (named_parameters(remove_duplicate=False): an alias and the name named_parameters() gives it) and
named_modules(). sim/hf_names_test.go holds memsh's parameter and module names against them (the names rule: users see
and write the model's own names).

    /work/venv-t/bin/python tools/oracle/hf_names.py > sim/testdata/hf_names.jsonl   # transformers 5.25.0, torch 2.15.0

The models are built on the meta device (no weights)."""
import json
import os

import torch
import transformers

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

HEADS = ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")
# config file (under sim/testdata/hf), class-name prefix, the classes hf_config builds
CASES = [
    ("flops/gpt2-tiny.json", "GPT2", ("LMHeadModel", "Model")),
    ("gpt2-tiny-resid-dropout.json", "GPT2", ("LMHeadModel",)),
    ("bert-tiny.json", "Bert", HEADS),
    ("bert-tiny-hidden-dropout.json", "Bert", ("ForSequenceClassification",)),
    ("roberta-tiny.json", "Roberta", HEADS),
    ("roberta-tiny-cls.json", "Roberta", ("ForSequenceClassification",)),
    ("xlm-roberta-tiny.json", "XLMRoberta", HEADS),
    ("deberta-v3-tiny.json", "DebertaV2", HEADS),
    ("modernbert-tiny.json", "ModernBert", HEADS),
    ("modernbert-tiny-clscls.json", "ModernBert", ("ForSequenceClassification",)),
    ("falcon-tiny.json", "Falcon", ("ForCausalLM",)),
    ("falcon-tiny-newarch.json", "Falcon", ("ForCausalLM",)),
    ("opt-125m.json", "OPT", ("ForCausalLM",)),
    ("bloom-560m.json", "Bloom", ("ForCausalLM",)),
    ("pythia-160m.json", "GPTNeoX", ("ForCausalLM",)),
    ("llama4-tiny.json", "Llama4", ("ForCausalLM",)),
]

for config, prefix, heads in CASES:
    raw = json.load(open(os.path.join(HF, config)))
    cfg = transformers.AutoConfig.for_model(**raw)
    for head in heads:
        with torch.device("meta"):
            model = getattr(transformers, prefix + head)(cfg)
        first = {id(p): n for n, p in model.named_parameters()}
        print(json.dumps({
            "config": config, "arch": prefix + head,
            "params": {n: p.numel() for n, p in model.named_parameters()},
            "aliases": {n: first[id(p)] for n, p in model.named_parameters(remove_duplicate=False) if first[id(p)] != n},
            "modules": [n for n, _ in model.named_modules()],
            "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0],
        }))
