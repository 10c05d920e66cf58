# kimivis.py: what autograd saves for the images of a tiny Kimi K2.5
# (Kimi_K25ForConditionalGeneration: MoonViT, the projector, Kimi K2's
# text model; sdpa, torch 2.15.0, on the CPU, under the transformers the
# venv holds: measured under 5.25.0 and 5.17.0), for
# sim/kimi_vision_oracle_test.go.
#
#   /work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [list]
#   /work/venv-t/bin/python kimivis.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the vision tower's and the
# projector's), then runs one training forward (labels = input_ids) twice
# on the same SEQ tokens: with COUNT images of HEIGHT x WIDTH pixels (their
# image tokens among the text) and without (text tokens in their place).
# It prints the bytes of the distinct storages saved for backward
# (parameters and buffers excluded) in both, and their difference: what
# the images add. Each image is resized and padded as
# Kimi_K25ImageProcessor does (navit_resize at its defaults: max_patches
# 16384, 512 patches a side; padded to a multiple of patch * merge
# pixels; kimivis_resize.py); the pixel patches are random, [patches, 3, patch, patch], in the
# model's dtype (the tower's Conv2d takes them as they come). bf16 builds
# the model in bf16 (from_config(dtype=torch.bfloat16)); ckpt checkpoints
# every GradientCheckpointingLayer (the tower's encoder layers and the
# text decoder layers; use_reentrant=False); list prints every saved
# storage.
import collections
import json
import sys

import torch
import transformers
from kimivis_resize import navit_resize
from transformers import AutoConfig, AutoModelForImageTextToText


torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
cfg = AutoConfig.for_model(**raw)
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = "sdpa"
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__)
print("params", sum(p.numel() for p in meta.parameters()))
print("vision_tower", sum(p.numel() for p in meta.model.vision_tower.parameters()), "mm_projector", sum(p.numel() for p in meta.model.mm_projector.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
dtype = torch.bfloat16 if "bf16" in extra else torch.float32
model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype).train()
if "ckpt" in extra:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
vc = cfg.vision_config
patch, (mh, mw) = vc.patch_size, vc.merge_kernel_size
_, (ph, pw) = navit_resize(height, width, patch, mh, 16384, 512)
gh, gw = ph // patch, pw // patch
per_image = gh * gw
tokens = per_image // (mh * mw)
tok = cfg.image_token_id
ids = [10 + i % 200 for i in range(seq)]
pos = 1
for _ in range(count):
    for j in range(tokens):
        ids[pos + j] = tok
    pos += tokens + 2
assert pos <= seq, "seq too short for the images"
input_ids = torch.tensor([ids])
pixels = torch.randn(count * per_image, 3, patch, patch).to(dtype)
grid = torch.tensor([[1, gh, gw]] * count)
skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}


def saved_bytes(**kw):
    # keep holds every packed tensor until backward: a node whose output
    # reaches no loss (the text model's routing) is freed at once, and its
    # storage's address, reused by a later tensor, would hide that tensor
    # from the count (run to run, by 768 or 1,024 bytes).
    saved, keep = collections.OrderedDict(), []

    def pack(t):
        keep.append(t)
        if t.data_ptr() not in skip:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, pixel_values=pixels, image_grid_thw=grid)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("grid", gh, gw, "patches", count * per_image, "image tokens", count * tokens)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
