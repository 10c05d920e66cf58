"""The parameters transformers builds for DeepSeek-V3-style routed configs (hf_config's buildRoutedAt families) with
the routed keys (and, "mla", the latent attention's sizes) left out, so that each config class's own defaults apply: one JSON line per case, the tiny (or
published) config under sim/testdata/hf with CASES' keys deleted ("text_config.KEY" for a composite model's language
model) and, where given, others renamed, built on the meta device as the class its "architectures" names.
sim/routed_defaults_test.go holds memsh's counts to them (TestRoutedDefaultsAsTransformers).

    /work/venv-t/bin/python tools/oracle/routed_defaults.py   # transformers 5.25.0, torch 2.15.0
"""
import json
import os

import torch
import transformers

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

# the routed reader's keys, each with a default in every class below unless a case keeps it
ROUTED = ("n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "intermediate_size",
          "first_k_dense_replace", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "topk_method",
          "scoring_func", "moe_layer_freq", "num_nextn_predict_layers", "hidden_act", "tie_word_embeddings",
          "num_experts", "num_shared_experts", "num_local_experts")


def drop(keep=(), prefix=""):
    return [prefix + k for k in ROUTED if k not in keep]


# the latent attention's sizes, each with a default in every MLA class below (SarvamMLAConfig's q_lora_rank: None)
MLA = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")

# name, config file, keys deleted, keys renamed {old: new}
CASES = [
    ("deepseek_v2", "deepseek-v2-tiny.json", drop(keep=("num_experts_per_tok",)), {}),
    ("deepseek_v2 moe", "deepseek-v2-tiny.json", drop(keep=("num_experts_per_tok", "first_k_dense_replace")), {}),
    ("deepseek_v3", "deepseek-v3-tiny.json", drop(), {}),
    ("deepseek_v3 moe", "deepseek-v3-tiny.json", drop(keep=("first_k_dense_replace",)), {}),
    ("deepseek_v32", "deepseek-v32-tiny.json", drop(), {}),
    ("deepseek_v32 moe", "deepseek-v32-tiny.json", drop(keep=("first_k_dense_replace",)), {}),
    ("glm_moe_dsa", "glm-5.json", drop(), {}),
    ("glm4_moe", "glm4_moe-tiny.json", drop(), {}),
    ("glm4_moe num_local_experts", "glm4_moe-tiny.json", [], {"n_routed_experts": "num_local_experts"}),
    ("glm4_moe_lite", "glm-4.7-flash.json", drop(), {}),
    ("dots1", "dots1-tiny.json", drop(keep=("n_routed_experts", "n_shared_experts", "num_experts_per_tok")), {}),
    ("dots1 moe", "dots1-tiny.json",
     drop(keep=("n_routed_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace")), {}),
    ("mistral4", "mistral4-tiny.json", drop(), {}),
    ("mistral4 moe", "mistral4-tiny.json", drop(keep=("first_k_dense_replace",)), {}),
    ("solar_open", "solar_open-tiny.json", drop(), {}),
    ("sarvam_moe", "sarvam_moe-tiny.json", drop(), {}),
    ("param2moe", "param2moe-tiny.json", drop(), {}),
    ("glm4v_moe", "glm4v-moe-tiny.json", drop(prefix="text_config.") + ["text_config.attention_bias"], {}),
    ("exaone_moe", "exaone_moe-tiny.json", drop(), {}),
    ("sarvam_mla", "sarvam_mla-tiny.json", drop(), {}),
    ("deepseek_v2 mla", "deepseek-v2-tiny.json", list(MLA), {}),
    ("deepseek_v3 mla", "deepseek-v3-tiny.json", list(MLA), {}),
    ("deepseek_v32 mla", "deepseek-v32-tiny.json", [k for k in MLA if k != "qk_rope_head_dim"], {}),  # the indexer is 8 wide
    ("glm_moe_dsa mla", "glm-5.json", list(MLA), {}),
    ("glm4_moe_lite mla", "glm-4.7-flash.json", list(MLA), {}),
    ("mistral4 mla", "mistral4-tiny.json", list(MLA), {}),
    ("sarvam_mla mla", "sarvam_mla-tiny.json", list(MLA), {}),
    ("kimi_k25 mla", "kimi-k2.5-tiny.json", ["text_config." + k for k in MLA], {}),
    ("kimi_k25", "kimi-k2.5-tiny.json", drop(prefix="text_config."), {}),
    ("kimi_k25 moe", "kimi-k2.5-tiny.json", drop(keep=("first_k_dense_replace",), prefix="text_config."), {}),
]


def edit(raw, dropped, renamed):
    for key in dropped:
        d, k = (raw["text_config"], key.split(".", 1)[1]) if key.startswith("text_config.") else (raw, key)
        d.pop(k, None)
    for old, new in renamed.items():
        raw[new] = raw.pop(old)
    return raw


for name, config, dropped, renamed in CASES:
    raw = edit(json.load(open(os.path.join(HF, config))), dropped, renamed)
    cfg = transformers.AutoConfig.for_model(**raw)
    cls = getattr(transformers, raw["architectures"][0], None)
    if cls is None:  # the remote code's name (SarvamMoEForCausalLM): the causal LM transformers maps the type to
        cls = transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = cls._from_config(cfg) if cls is transformers.AutoModelForCausalLM else cls(cfg)
    print(json.dumps({"case": name, "config": config, "params": sum(p.numel() for p in model.parameters()),
                      "transformers": transformers.__version__}))
