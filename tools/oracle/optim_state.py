"""Which parameters of a tiny Gemma 4 with vision and audio towers get a gradient, and the optimizer state
torch.optim.AdamW holds after one step (transformers 5.25.0, torch 2.15.0, fp32, on the CPU), for
sim/optimizer_idle_test.go: one training step on text only, then (Gemma 4) one on a fresh model with a 64x64 image.

    /work/venv-t/bin/python tools/oracle/optim_state.py sim/testdata/hf/gemma4-av-tiny.json SEQ
    /work/venv-t/bin/python tools/oracle/optim_state.py sim/testdata/hf/qwen2.5-vl-tiny.json SEQ   (text only)

For each run it prints one JSON line: the parameters and their elements, those with a gradient after
backward, and after optimizer.step() the parameters with state and the bytes of their exp_avg and
exp_avg_sq (the step counter, a 0-d tensor per parameter, apart)."""
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

sys.path.insert(0, os.path.dirname(__file__))
import gemma4vl_inputs  # noqa: E402

torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
seq = int(sys.argv[2])
cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "vision_soft_tokens_per_image"})
for c in (cfg, cfg.vision_config, cfg.text_config, getattr(cfg, "audio_config", None)):
    if c is not None:  # the audio tower has no sdpa path: eager, as its model loads by default
        c._attn_implementation = "eager" if c is getattr(cfg, "audio_config", None) else "sdpa"


def step(images):
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if raw["model_type"] != "gemma4":  # text only
        vocab = raw.get("text_config", raw)["vocab_size"]  # ids below any special token of the tiny configs
        ids, extra = torch.randint(10, min(90, vocab), (1, seq)), {}
    else:
        ids, extra, _ = gemma4vl_inputs.inputs(raw, 1, 64, 64, seq)
    if not images and extra:
        ids[ids == raw["image_token_id"]] = 20
        extra = {}
    model(input_ids=ids, labels=ids, **extra).loss.backward()
    params = list(model.parameters())
    with_grad = [p for p in params if p.grad is not None]
    opt.step()
    moments = sum(t.numel() * t.element_size() for s in opt.state.values() for k, t in s.items() if k != "step")
    return {"images": images, "params": len(params), "numel": sum(p.numel() for p in params),
            "with_grad": len(with_grad), "grad_numel": sum(p.numel() for p in with_grad),
            "with_state": len(opt.state), "moment_bytes": moments,
            "state_numel": sum(p.numel() for p in opt.state)}


print("transformers", transformers.__version__, "torch", torch.__version__)
for images in (False, True) if raw["model_type"] == "gemma4" else (False,):
    print(json.dumps(step(images)))
