# gemma4vl.py: what autograd saves for the images of a tiny Gemma 4 with
# its vision tower (transformers 5.17.0, Gemma4ForConditionalGeneration,
# sdpa or eager, fp32 or bf16, torch 2.15.0, on the CPU), for
# sim/vision_gemma4_oracle_test.go.
#
#   /work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [eager] [list]
#   /work/venv-t/bin/python gemma4vl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, for the hub's configs, with the towers'
# shares), then runs one training forward (labels = input_ids) twice on the
# same SEQ tokens: with COUNT images of HEIGHT x WIDTH pixels (each its soft
# tokens between boi and eoi, mm_token_type_ids 1 on them) and without (text
# tokens in their place). It prints the bytes of the distinct storages saved
# for backward (parameters and buffers excluded) in both, and their difference: what the
# images add. The images go through Gemma4ImageProcessor's own steps: the
# aspect-ratio-preserving size (get_aspect_ratio_preserving_size) for
# max_soft_tokens = the config's vision_soft_tokens_per_image, patches of
# patch_size, (x, y) positions, padded to max_soft_tokens * k^2 patches with
# positions -1; the pixel values are random in [0, 1), fp32. bf16 casts the
# model to bf16 (model.to(torch.bfloat16)); list prints every saved storage.
import collections
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

import gemma4vl_inputs

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
extra = sys.argv[6:] if len(sys.argv) > 6 else []
attn = "eager" if "eager" in extra else "sdpa"
cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "vision_soft_tokens_per_image"})
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = attn
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__, attn)
print("params", sum(p.numel() for p in meta.parameters()))
print("vision_tower", sum(p.numel() for p in meta.model.vision_tower.parameters()),
      "embed_vision", sum(p.numel() for p in meta.model.embed_vision.parameters()))
if meta.model.audio_tower is not None:
    print("audio_tower", sum(p.numel() for p in meta.model.audio_tower.parameters()),
          "embed_audio", sum(p.numel() for p in meta.model.embed_audio.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
model = AutoModelForImageTextToText.from_config(cfg)
if "bf16" in extra:
    model = model.to(torch.bfloat16)
model = model.train()
input_ids, extra_inputs, (th, tw, max_patches, real, tokens) = gemma4vl_inputs.inputs(raw, count, height, width, seq)
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}


def saved_bytes(**kw):
    saved = collections.OrderedDict()

    def pack(t):
        if t.untyped_storage().data_ptr() in buffers:  # the clip bounds, std_scale: no new memory
            saved.setdefault(("buffer", t.untyped_storage().data_ptr()), (tuple(t.shape), str(t.dtype), 0, "buffer"))
        elif t.untyped_storage().data_ptr() not in params:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, **extra_inputs)
text_ids = input_ids.clone()
text_ids[text_ids == raw["image_token_id"]] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("resized", th, tw, "patches", count, "x", max_patches, "real", real, "soft tokens", count * tokens)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
