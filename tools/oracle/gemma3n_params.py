# gemma3n_params.py: the parameters of a Gemma 3n text model as transformers
# builds it from a config.json (Gemma3nForCausalLM on the meta device, no
# weights), with the shares the model card's "effective" count leaves out,
# for sim/gemma3n_test.go (TestGemma3nParams).
#
#   python tools/oracle/gemma3n_params.py CONFIG.json
#   PYTHONPATH=TIMM python tools/oracle/gemma3n_params.py CONFIG.json --full
#
# CONFIG is a gemma3n_text config.json (architectures[0] names the class)
# or a gemma3n one, whose text_config is read. It prints the total, the
# per-layer embedding table (embed_tokens_per_layer), the token embedding
# (tied to lm_head) and the k_proj, v_proj and k_norm weights the
# checkpoints hold for the layers that reuse earlier keys and values,
# which transformers 5.6 and later do not build (they are dropped on load).
#
# With --full it builds Gemma3nForConditionalGeneration around that text
# model, its towers from the released configs' vision_config (timm's
# mobilenetv5_300m_enc) and Gemma3nAudioConfig's defaults, and prints each
# part. timm must be importable (TIMM: the timm wheel unpacked, e.g. pip
# install --no-deps --target TIMM timm); its imports of torchvision and PIL,
# which building a model on the meta device never calls, are answered by
# stand-ins when those packages are absent.
import importlib.machinery
import importlib.util
import json
import sys
import types
from unittest import mock


class _StandIn(types.ModuleType):
    """A module whose every attribute is a mock (torchvision, PIL)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return sys.modules.get(self.__name__ + "." + name) or mock.MagicMock(name=self.__name__ + "." + name)


class _StandIns:
    def __init__(self, roots):
        self.roots = roots

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StandIn(spec.name)
        m.__path__, m.__version__ = [], "0.0.0"
        return m

    def exec_module(self, module):
        pass


full = "--full" in sys.argv[2:]
if full:
    missing = [m for m in ("torchvision", "PIL") if importlib.util.find_spec(m) is None]
    if missing:
        sys.meta_path.insert(0, _StandIns(missing))  # before transformers looks for them

import torch  # noqa: E402

import transformers  # noqa: E402

raw = json.load(open(sys.argv[1]))
if raw.get("model_type") == "gemma3n":
    raw = dict(raw["text_config"], architectures=["Gemma3nForCausalLM"])
text = {k: v for k, v in raw.items() if k != "architectures"}
cfg = transformers.AutoConfig.for_model(**text)
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
if full:
    import timm

    vision = {"architecture": "mobilenetv5_300m_enc", "do_pooling": False, "hidden_size": 2048, "rms_norm_eps": 1e-6,
              "vocab_offset": 262144, "vocab_size": 128, "num_classes": 2, "label_names": ["LABEL_0", "LABEL_1"]}
    cfg = transformers.Gemma3nConfig(text_config=text, vision_config=vision, audio_config={})
    with torch.device("meta"):
        model = transformers.Gemma3nForConditionalGeneration(cfg)
    parts = {}
    for k, p in model.named_parameters():
        part = ".".join(k.split(".")[:2])
        parts[part] = parts.get(part, 0) + p.numel()
    n = sum(parts.values())
    print("timm", timm.__version__, "class", type(model).__name__, "params", n, "with_dropped_kv", n + dropped,
          *(f"{k} {v}" for k, v in parts.items()))
