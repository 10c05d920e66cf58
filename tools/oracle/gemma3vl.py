# gemma3vl.py: what autograd saves for the images of a tiny Gemma 3 with its
# SigLIP vision tower (Gemma3ForConditionalGeneration, sdpa or eager, fp32 or
# bf16, on the CPU), for sim/vision_gemma3_oracle_test.go.
#
#   /work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json COUNT SEQ [bf16] [eager] [list] [lora]
#   /work/venv-t/bin/python gemma3vl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, for the hub's configs, with the tower's and
# the projector's shares), then runs one training forward (labels =
# input_ids) twice on the same SEQ tokens: with COUNT images (each
# Gemma3Processor's layout: boi, mm_tokens_per_image image tokens, eoi;
# token_type_ids 1 on the image tokens, as the processor returns them) and
# without (text tokens in their place, no token_type_ids). Gemma3Processor
# resizes every image to image_size x image_size (do_pan_and_scan off, its
# default), so the pixel values are COUNT random [3, image_size,
# image_size] images in [0, 1), fp32. It prints the bytes of the distinct
# storages saved for backward (parameters and buffers excluded) in both,
# and their difference: what the images add. bf16 casts the model
# (model.to(torch.bfloat16)); list prints every saved storage.
import collections
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
extra = sys.argv[4:] if len(sys.argv) > 4 else []
attn = "eager" if "eager" in extra else "sdpa"
cfg = AutoConfig.for_model(**raw)
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = attn
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__, attn)
print("params", sum(p.numel() for p in meta.parameters()))
print("vision_tower", sum(p.numel() for p in meta.model.vision_tower.parameters()),
      "multi_modal_projector", sum(p.numel() for p in meta.model.multi_modal_projector.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, seq = int(sys.argv[2]), int(sys.argv[3])
model = AutoModelForImageTextToText.from_config(cfg)
if "bf16" in extra:
    model = model.to(torch.bfloat16)
model = model.train()
if "lora" in extra:  # PEFT's all-linear (r=4, alpha=8, fp32 adapters), the tower's linears too
    import peft
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
side = cfg.vision_config.image_size
tokens = cfg.mm_tokens_per_image
ids = [10 + i % 150 for i in range(seq)]
types = [0] * seq
pos = 1
for _ in range(count):
    ids[pos] = cfg.boi_token_index
    for j in range(tokens):
        ids[pos + 1 + j] = cfg.image_token_index
        types[pos + 1 + j] = 1
    ids[pos + 1 + tokens] = cfg.eoi_token_index
    pos += tokens + 2
assert pos <= seq, "seq too short for the images"
input_ids = torch.tensor([ids])
pixel_values = torch.rand(count, 3, side, side)
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}


def saved_bytes(**kw):
    saved = collections.OrderedDict()

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in buffers and key not in saved:
            saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, pixel_values=pixel_values, token_type_ids=torch.tensor([types]))
text_ids = input_ids.clone()
text_ids[text_ids == cfg.image_token_index] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("images", count, "of", side, "x", side, "image tokens", count * tokens, "seq", seq)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
