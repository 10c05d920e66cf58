"""What PEFT's LoRA adapts with target_modules="all-linear" (every nn.Linear and Conv1D but the output layer, what
memsh fit --lora and --qlora ask for) on one config of each model class hf_config builds (hf_names.py's CASES, their
first class): get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")) on the meta device.
One JSON line per class: the trainable parameter count and the adapted modules' paths (base_model.model. and the base
layer dropped), or the error PEFT raises. sim/lora_all_linear_test.go holds memsh's lora(targets=["all-linear"]) to
them.

    /work/venv-t/bin/python tools/oracle/peft_all_linear.py > sim/testdata/peft_all_linear.jsonl   # peft 0.21.2, transformers 5.25.0, torch 2.15.0
"""
import json
import logging
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stable_order import error_line, pin_hash_seed  # noqa: E402

pin_hash_seed()  # set iteration orders fixed, so a second run writes the same lines

import peft  # noqa: E402
import torch
import transformers

from hf_names import CASES, HF  # noqa: E402


# vision-language configs beside CASES' (Gemma 3's, Gemma 4's, Gemma 4's with its audio tower), as their checkpoints' class
TOWERS = [("gemma3-vl-tiny.json", "Gemma3ForConditionalGeneration"), ("gemma4-vl-tiny.json", "Gemma4ForConditionalGeneration"),
          ("gemma4-av-tiny.json", "Gemma4ForConditionalGeneration")]


def main():
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    for config, arch in [(c, p + h[0]) for c, p, h in CASES] + TOWERS:
        raw = json.load(open(os.path.join(HF, config)))
        cfg = transformers.AutoConfig.for_model(**raw)
        with torch.device("meta"):
            model = getattr(transformers, arch)(cfg)
        line = {"config": config, "arch": arch}
        try:
            pm = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
            line["trainable"] = sum(p.numel() for p in pm.parameters() if p.requires_grad)
            line["adapted"] = sorted(n.removeprefix("base_model.model.") for n, m in pm.named_modules()
                                     if isinstance(m, peft.tuners.lora.LoraLayer))
        except Exception as e:  # noqa: BLE001 - what PEFT says is the record
            line["error"] = error_line(e)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
