"""Which modules and parameters PEFT's LoRA adapts, and how many parameters it trains, on tiny transformers MoE
models built with 3-D experts (transformers 5: `experts.gate_up_proj` [E, 2h, d] and `experts.down_proj` [E, d, h]):
get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=T)) for T each target list below. One JSON line
per config and target list: the trainable parameter count, PEFT's resolved target_modules and target_parameters,
its rank_pattern, and each adapter with the shapes of its lora_A and lora_B. An adapter is named by the module
PEFT wraps: a LoraLayer on an nn.Linear by the module's path; a ParamWrapper (a 2-D or 3-D nn.Parameter targeted
directly) by the parameter's path, PEFT's nesting (`experts.base_layer`) undone. `error` is get_peft_model's
exception where it raises. sim/lora_moe_test.go holds memsh's lora(targets=) against them.

    /work/venv-t/bin/python tools/oracle/peft_moe_targets.py > sim/testdata/peft_moe_targets.jsonl   # peft 0.21.2, transformers 5.25.0, torch 2.15.0

    PYTHONPATH=/tmp/tf457:/tmp/tf457dep /work/venv-t/bin/python tools/oracle/peft_moe_targets.py > sim/testdata/peft_moe_targets_457.jsonl

(the second under transformers 4.57.1, `pip install --target /tmp/tf457 --no-deps transformers==4.57.1` and its
requests, huggingface_hub<1.0 and tokenizers 0.22 in /tmp/tf457dep: per-expert nn.Linear, which PEFT adapts as any
linear; the model types 4.57.1 lacks are left out). PYTHONPATH=<an unpacked older peft wheel> runs the same cases
under that PEFT release (docs/peft.md's MoE section has 0.18.0, 0.19.0 and 0.20.0). The models are built on the meta
device (no weights)."""
import json
import os
import sys
import warnings

import peft
import torch
import transformers

warnings.filterwarnings("ignore")
HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ATTN + ["gate_proj", "up_proj", "down_proj"]
COMMON = ("all-linear", ATTN, MLP, ["gate_proj", "up_proj", "down_proj"], ["down_proj"], ["gate_proj", "down_proj"])
MIXTRAL = ("all-linear", ATTN, MLP, ATTN + ["w1", "w2", "w3"], ["mlp.gate"], ["w1"])
EXPERTS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
# config file, target_modules, target_parameters: PEFT's own way to the 3-D experts
PARAM_CASES = [
    ("gpt_oss-tiny.json", ATTN, EXPERTS),
    ("gpt_oss-tiny.json", "all-linear", EXPERTS),
    ("gpt_oss-tiny.json", [], ["mlp.experts.down_proj"]),
    ("qwen2_moe-tiny.json", ATTN, EXPERTS),
    ("phimoe-tiny.json", ATTN, EXPERTS),
    ("granitemoe-tiny.json", ATTN, ["block_sparse_moe.experts.gate_up_proj", "block_sparse_moe.experts.down_proj"]),
    ("qwen3_moe-tiny.json", ATTN, EXPERTS),
    ("qwen3_moe-tiny.json", MLP, ["mlp.experts.down_proj"]),
    ("qwen3_moe-tiny.json", ATTN, ["q_proj.weight"]),
]
CASES = [
    ("mixtral-tiny.json", MIXTRAL),
    ("minimax_m2-tiny.json", MIXTRAL),
    ("phimoe-tiny.json", ("all-linear", MLP)),
    ("qwen2_moe-tiny.json", COMMON),
    ("qwen3_moe-tiny.json", COMMON + (["mlp.gate"],)),
    ("olmoe-tiny.json", COMMON),
    ("deepseek-v2-tiny.json", COMMON),
    ("deepseek-v3-tiny.json", COMMON + (["mlp.gate"],)),
    ("glm4_moe-tiny.json", COMMON),
    ("dots1-tiny.json", COMMON),
    ("ernie4_5_moe-tiny.json", COMMON),
    ("hunyuan_v1_moe-tiny.json", COMMON),
    ("longcat-flash-tiny.json", ("all-linear", MLP, ["classifier"])),
    ("qwen3-next-tiny.json", ("all-linear", MLP)),
    ("gpt_oss-tiny.json", ("all-linear", ATTN)),
    ("granitemoe-tiny.json", ("all-linear", ATTN)),
    ("lfm2_moe-tiny.json", ("all-linear", ["q_proj", "k_proj", "v_proj", "out_proj", "w1", "w2", "w3"])),
    ("llama4-tiny.json", ("all-linear", MLP)),
]


def adapters(pm):
    out = {}
    for name, m in pm.named_modules():
        if not isinstance(m, peft.tuners.lora.LoraLayer):
            continue
        path = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if type(m).__name__ == "ParamWrapper":
            path += "." + m.parameter_name
        out[path] = [list(m.lora_A["default"].weight.shape), list(m.lora_B["default"].weight.shape)]
    return dict(sorted(out.items()))


def main(only):
    cases = [(config, targets, None) for config, target_lists in CASES for targets in target_lists]
    cases += [(config, targets, params) for config, targets, params in PARAM_CASES]
    for config, targets, params in cases:
        if only and config not in only:
            continue
        raw = json.load(open(os.path.join(HF, config)))
        try:
            cfg = transformers.AutoConfig.for_model(**raw)
        except (ValueError, KeyError):  # a model type this release does not have
            continue
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        line = {"config": config, "arch": type(model).__name__, "targets": targets}
        if params is not None:
            line["params"] = params
        try:
            pm = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets,
                                                            target_parameters=params))
        except Exception as e:  # PEFT refuses: memsh must too
            line["error"] = f"{type(e).__name__}: {e}"
        else:
            c = pm.peft_config["default"]
            line.update({
                "resolved": sorted(c.target_modules or []),
                "target_parameters": sorted(c.target_parameters or []),
                "rank_pattern": c.rank_pattern,
                "trainable": sum(p.numel() for p in pm.parameters() if p.requires_grad),
                "adapters": adapters(pm),
            })
        line.update({"peft": peft.__version__, "transformers": transformers.__version__})
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1:])
