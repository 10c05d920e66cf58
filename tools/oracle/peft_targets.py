"""Which modules PEFT's LoRA adapts, and how many parameters it trains, for lora targets given by module name on the
tiny configs of hf_names.py: get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=T)) with T each
target list below, None standing for PEFT's default for the model type
(TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: bert, roberta, xlm-roberta ["query", "value"], gpt2 ["c_attn"],
deberta-v2 ["query_proj", "value_proj"]). One JSON line per model class and target list: the trainable parameter
count and the adapted modules' paths (base_model.model. and the base layer dropped). sim/lora_names_test.go holds
memsh's lora(targets=) against them.

    /work/venv-t/bin/python tools/oracle/peft_targets.py > sim/testdata/peft_targets.jsonl   # peft 0.21.2, transformers 5.25.0, torch 2.15.0

The models are built on the meta device (no weights)."""
import json
import os
import warnings

import peft
import torch
import transformers

warnings.filterwarnings("ignore")
HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

ENCODER = (None, ["query", "value"], ["key", "dense"], ["attention.self.query"], ["output.dense"], "all-linear")
# config file, class-name prefix, classes, target lists
CASES = [
    ("flops/gpt2-tiny.json", "GPT2", ("LMHeadModel", "Model"), (None, ["c_proj"], ["c_fc", "c_attn"], "all-linear")),
    ("bert-tiny.json", "Bert", ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification"), ENCODER),
    ("roberta-tiny-cls.json", "Roberta", ("ForSequenceClassification", "ForMaskedLM"), ENCODER),
    ("xlm-roberta-tiny.json", "XLMRoberta", ("ForTokenClassification",), ENCODER),
    ("deberta-v3-tiny.json", "DebertaV2", ("ForMaskedLM", "ForSequenceClassification"),
     (None, ["key_proj", "dense"], "all-linear")),
    ("modernbert-tiny.json", "ModernBert", ("ForMaskedLM", "ForSequenceClassification"), (["Wqkv"], ["Wo", "Wi"], "all-linear")),
]

for config, prefix, heads, target_lists in CASES:
    raw = json.load(open(os.path.join(HF, config)))
    cfg = transformers.AutoConfig.for_model(**raw)
    for head in heads:
        for targets in target_lists:
            with torch.device("meta"):
                model = getattr(transformers, prefix + head)(cfg)
            lc = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets)
            pm = peft.get_peft_model(model, lc)
            adapted = sorted(n.removeprefix("base_model.model.") for n, m in pm.named_modules()
                             if isinstance(m, peft.tuners.lora.LoraLayer))
            print(json.dumps({
                "config": config, "arch": prefix + head, "targets": targets,
                "resolved": sorted(pm.peft_config["default"].target_modules),
                "trainable": sum(p.numel() for p in pm.parameters() if p.requires_grad),
                "adapted": adapted,
                "peft": peft.__version__, "transformers": transformers.__version__,
            }))
