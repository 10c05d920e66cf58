"""Llama 4's parameter counts on the meta device (sim/llama4_test.go).

/work/venv-t/bin/python tools/oracle/llama4_params.py sim/testdata/hf/llama-4-*.json sim/testdata/hf/llama4-tiny.json
(transformers 5.17.0, torch 2.15.0). For a llama4 config it prints the
text model's count (Llama4ForCausalLM of text_config) and the whole
Llama4ForConditionalGeneration's; for llama4_text the text model's and
its named parameters.
"""
import json
import sys

import torch
import transformers
from transformers import Llama4Config, Llama4ForCausalLM, Llama4ForConditionalGeneration, Llama4TextConfig

print("transformers", transformers.__version__, "torch", torch.__version__)
for path in sys.argv[1:]:
    cfg = json.load(open(path))
    with torch.device("meta"):
        if cfg["model_type"] == "llama4":
            full = Llama4ForConditionalGeneration(Llama4Config(**{k: v for k, v in cfg.items() if k != "architectures"}))
            tc = Llama4TextConfig(**cfg["text_config"])
            text = Llama4ForCausalLM(tc)
            t = sum(p.numel() for p in text.parameters())
            moe = len(tc.moe_layers) * (tc.num_local_experts - tc.num_experts_per_tok) * 3 * tc.hidden_size * tc.intermediate_size
            print(path, "text", t, "full", sum(p.numel() for p in full.parameters()), "text active", t - moe)
        else:
            text = Llama4ForCausalLM(Llama4TextConfig(**{k: v for k, v in cfg.items() if k != "architectures"}))
            print(path, "text", sum(p.numel() for p in text.parameters()))
            for name, p in text.named_parameters():
                print("  ", name, tuple(p.shape))
