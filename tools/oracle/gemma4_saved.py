"""What Gemma 4's text model (Gemma4ForCausalLM, transformers 5.17.0) keeps for backward, and its
parameter count, on the CPU: the model built from a config.json in bf16, one batch, the loss of
random labels, saved_tensors_hooks counting each storage once (parameters excluded).

    /work/venv-t/bin/python tools/oracle/gemma4_saved.py CONFIG ATTN SEQ [LAYERS...]

ATTN is sdpa or eager; each LAYERS value rebuilds the model with the first n layer types of the
config (the layer's own saves are the difference of two counts). --ckpt turns on transformers'
gradient checkpointing (use_reentrant=False) of every decoder layer. One JSON line per count; the figures
are in sim/gemma4_test.go. --count prints the parameter count on the meta device only."""
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def load(path, layers=None):
    raw = json.load(open(path))
    raw.pop("architectures", None)
    if layers is not None:
        raw["layer_types"] = raw["layer_types"][:layers]
        raw["num_hidden_layers"] = layers
    cfg = transformers.Gemma4TextConfig(**{k: v for k, v in raw.items() if k != "model_type"}) if raw.get(
        "model_type") == "gemma4_text" else AutoConfig.for_model(**raw)
    return cfg


def count(path):
    cfg = load(path)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in m.parameters())


def measure(path, attn, seq, layers):
    torch.manual_seed(0)
    cfg = load(path, layers)
    cfg._attn_implementation = attn
    m = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn).to(torch.bfloat16)
    m.train()
    if "--ckpt" in sys.argv:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    ids = torch.randint(0, cfg.vocab_size, (1, seq))
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = (s.nbytes(), str(t.dtype), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    return {"config": path.split("/")[-1], "attn": attn, "seq": seq, "layers": layers,
            "saved_bytes": sum(v[0] for v in seen.values()), "storages": len(seen)}, seen


if __name__ == "__main__":
    print("torch", torch.__version__, "transformers", transformers.__version__, file=sys.stderr)
    if sys.argv[1] == "--count":
        for p in sys.argv[2:]:
            print(json.dumps({"config": p, "params": count(p)}))
        sys.exit(0)
    path, attn, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for n in [int(a) for a in sys.argv[4:] if not a.startswith("-")]:
        row, seen = measure(path, attn, seq, n)
        print(json.dumps(row))
        if "-v" in sys.argv:
            for v in sorted(seen.values(), key=lambda v: -v[0]):
                print("   ", v)
