# gemma4uvl.py: what autograd saves for the images of a tiny Gemma 4
# unified (Gemma4UnifiedForConditionalGeneration: no vision tower, the
# merged pixel patches projected by Gemma4UnifiedVisionEmbedder;
# transformers 5.25.0, sdpa or eager, fp32 or bf16, torch 2.15.0, on the
# CPU), for sim/gemma4_unified_test.go.
#
#   /work/venv-t/bin/python gemma4uvl.py ../../sim/testdata/hf/gemma4-unified-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [eager] [list]
#   /work/venv-t/bin/python gemma4uvl.py CONFIG.json --params
#
# As gemma4vl.py for Gemma 4: the parameters on the meta device (and
# embed_vision's and embed_audio's shares), then one training forward
# (labels = input_ids) twice on the same SEQ tokens: with COUNT images of
# HEIGHT x WIDTH pixels (each its soft tokens between boi and eoi,
# mm_token_type_ids 1 on them) and without (text tokens in their place,
# no mm_token_type_ids). It prints the bytes of the distinct storages
# saved for backward (parameters and buffers excluded) in both and their
# difference. The images are laid out as Gemma4UnifiedImageProcessor
# lays them out: resized by Gemma 4's get_aspect_ratio_preserving_size for
# max_soft_tokens = the config's vision_soft_tokens_per_image, k x k
# patches of patch_size merged into one (patches_merge: (k patch)^2 x 3
# values), their (x, y) positions, padded to max_soft_tokens with
# positions -1; the pixel values random in [0, 1), fp32.
import collections
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

from gemma4vl_inputs import get_aspect_ratio_preserving_size

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
extra = sys.argv[6:] if len(sys.argv) > 6 else []
attn = "eager" if "eager" in extra else "sdpa"
cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "vision_soft_tokens_per_image"})
for c in (cfg, cfg.text_config):
    c._attn_implementation = attn
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__, attn)
print("params", sum(p.numel() for p in meta.parameters()))
for name in ("embed_vision", "embed_audio"):
    mod = getattr(meta.model, name)
    if mod is not None:
        print(name, sum(p.numel() for p in mod.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
model = AutoModelForImageTextToText.from_config(cfg)
if "bf16" in extra:
    model = model.to(torch.bfloat16)
model = model.train()

vc = raw["vision_config"]
patch, k = vc.get("patch_size", 16), vc.get("pooling_kernel_size", 3)
soft = raw.get("vision_soft_tokens_per_image", 280)
th, tw = get_aspect_ratio_preserving_size(height, width, patch, soft * k * k, k)
gh, gw = th // (patch * k), tw // (patch * k)  # the merged grid
tokens = gh * gw
pixels = torch.zeros(count, soft, 3 * (patch * k) ** 2)
pixels[:, :tokens] = torch.rand(count, tokens, 3 * (patch * k) ** 2)
gx, gy = torch.meshgrid(torch.arange(gw), torch.arange(gh), indexing="xy")
positions = torch.full((count, soft, 2), -1, dtype=torch.long)
positions[:, :tokens] = torch.stack([gx, gy], dim=-1).reshape(tokens, 2)
ids = [10 + i % 200 for i in range(seq)]
types = [0] * seq
pos = 1
for _ in range(count):
    ids[pos] = raw["boi_token_id"]
    for j in range(tokens):
        ids[pos + 1 + j] = raw["image_token_id"]
        types[pos + 1 + j] = 1
    ids[pos + 1 + tokens] = raw["eoi_token_id"]
    pos += tokens + 3
assert pos <= seq, "seq too short for the images"
input_ids = torch.tensor([ids])
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


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, pixel_values=pixels, image_position_ids=positions,
                              mm_token_type_ids=torch.tensor([types]))
text_ids = input_ids.clone()
text_ids[text_ids == raw["image_token_id"]] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("resized", th, tw, "soft tokens", count, "x", tokens, "padded to", soft)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
