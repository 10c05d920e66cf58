# llama4vis.py: what autograd saves for the images of a tiny Llama 4
# (transformers 5.17.0, Llama4ForConditionalGeneration, sdpa, torch 2.15.0,
# on the CPU), for sim/llama4_vision_oracle_test.go.
#
#   /work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [eager] [list]
#   /work/venv-t/bin/python llama4vis.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that), then runs one training forward (labels =
# input_ids) twice on the same SEQ tokens: with COUNT images of HEIGHT x
# WIDTH pixels, their image tokens (<|patch|>, image_token_index) among the
# text as Llama4Processor lays them out, and without (text tokens in their
# place). It prints the bytes of the distinct storages saved for backward
# (parameters and buffers excluded: the rotary buffer freqs_ci is the
# model's, not the step's) in both, and their difference: what the images
# add. Each image is tiled as Llama4ImageProcessor does (its
# find_supported_resolutions and get_best_fit: llama4vis_tiles.py; tiles of
# image_size, max_patches 16, a global tile when there are several); the
# pixels are random, fp32, in the model's dtype for bf16 (Llama4VisionModel
# does not cast them). bf16 builds the model in bf16 (from_config(dtype=
# torch.bfloat16), as from_pretrained(dtype=...) loads it: the complex
# rotary buffer stays complex64); eager uses eager attention; list prints
# every saved storage.
import collections
import json
import sys

import llama4vis_tiles
import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
extra = sys.argv[6:]
attn = "eager" if "eager" in extra else "sdpa"
cfg = AutoConfig.for_model(**raw)
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = attn
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__, attn)
print("params", sum(p.numel() for p in meta.parameters()))
print("vision", sum(p.numel() for p in meta.vision_model.parameters()), "projector", sum(p.numel() for p in meta.multi_modal_projector.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
dtype = torch.bfloat16 if "bf16" in extra else torch.float32
model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype).train()
vc = raw["vision_config"]
tile, patch, ratio = vc["image_size"], vc["patch_size"], vc["pixel_shuffle_ratio"]
rh, rw = llama4vis_tiles.canvas(height, width, tile)
tiles = rh * rw + (1 if rh * rw > 1 else 0)
per_tile = (tile // patch) ** 2 // int(round(1 / ratio**2))
tok = raw["image_token_index"]
ids = [10 + i % 80 for i in range(seq)]
pos = 1
for _ in range(count):
    for j in range(tiles * per_tile):
        ids[pos + j] = tok
    pos += tiles * per_tile + 2
assert pos <= seq, "seq too short for the images"
input_ids = torch.tensor([ids])
pixels = torch.randn(count * tiles, vc.get("num_channels", 3), tile, tile).to(dtype)
skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}


def saved_bytes(**kw):
    saved = collections.OrderedDict()

    def pack(t):
        if t.data_ptr() not in skip:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, pixel_values=pixels)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("canvas", rh, rw, "tiles", count * tiles, "image tokens", count * tiles * per_tile)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
