# gemma3n_params.py: the parameters of a Gemma 3n text model as transformers
# builds it from a config.json (Gemma3nForCausalLM on the meta device, no
# weights), with the shares the model card's "effective" count leaves out,
# for sim/gemma3n_test.go (TestGemma3nParams).
#
#   python tools/oracle/gemma3n_params.py CONFIG.json
#
# CONFIG is a gemma3n_text config.json (architectures[0] names the class)
# or a gemma3n one, whose text_config is read. It prints the total, the
# per-layer embedding table (embed_tokens_per_layer), the token embedding
# (tied to lm_head) and the k_proj, v_proj and k_norm weights the
# checkpoints hold for the layers that reuse earlier keys and values,
# which transformers 5.6 and later do not build (they are dropped on load).
import json
import sys

import torch

import transformers

raw = json.load(open(sys.argv[1]))
if raw.get("model_type") == "gemma3n":
    raw = dict(raw["text_config"], architectures=["Gemma3nForCausalLM"])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
with torch.device("meta"):
    model = getattr(transformers, raw["architectures"][0])(cfg)
named = dict(model.named_parameters())
total = sum(p.numel() for p in named.values())
table = sum(p.numel() for k, p in named.items() if "embed_tokens_per_layer" in k)
embed = sum(p.numel() for k, p in named.items() if k.endswith("embed_tokens.weight"))
shared = sum(1 for m in cfg.kv_sharing_modes if m == "reuse")
dropped = shared * (2 * cfg.hidden_size * cfg.num_key_value_heads * cfg.head_dim + cfg.head_dim)
print("transformers", transformers.__version__, "torch", torch.__version__, "class", type(model).__name__)
print("params", total, "per_layer_table", table, "embed_tokens", embed, "kv_shared_layers", shared, "dropped_kv_weights", dropped,
      "effective", total - table - embed + dropped)
