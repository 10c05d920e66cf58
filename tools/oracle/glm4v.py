# glm4v.py: what autograd saves for the images or videos of a tiny GLM-4.1V
# or GLM-4.5V (transformers 5.25.0, Glm4vForConditionalGeneration /
# Glm4vMoeForConditionalGeneration / Glm46VForConditionalGeneration; sdpa or
# eager, fp32 or bf16, every layer checkpointed or not, torch 2.15.0, on the
# CPU), for sim/glm4v_oracle_test.go.
#
#   /work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json COUNT HEIGHT WIDTH SEQ [video=FRAMES] [fps=F] [bf16] [ckpt] [eager] [atbackward] [list] [lora]
#   /work/venv-t/bin/python glm4v.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that), then runs one training forward (labels =
# input_ids) twice on the same SEQ tokens: with COUNT images of HEIGHT x
# WIDTH pixels (or, with video=FRAMES, COUNT videos of FRAMES frames sampled
# F a second, default 2) and without (text tokens in their place). The
# inputs are laid out as Glm4vProcessor and its image and video processors
# lay them out: each image resized by smart_resize (a multiple of patch *
# merge pixels a side, within the class's min and max pixels), its tokens
# between image_start and image_end, mm_token_type_ids 1 on them; a video's
# frames padded to a multiple of temporal_patch_size, resized as the video
# processor does, each temporal group's tokens (image_token_id, type 2)
# between image_start and image_end followed by the group's timestamp
# (int seconds, as text tokens: one a run of up to three digits, GLM-4's
# pre-tokenizer), all between video_start and video_end. The pixel patches
# are random, fp32. It prints the bytes of the distinct storages saved for
# backward (parameters and buffers excluded) in both runs and their
# difference (vl_harness.py); with atbackward, those the graph still holds
# when the backward starts (saved_at_backward).
import math
import sys

import torch
from vl_harness import load, report, saved_at_backward, saved_bytes, train_model

raw, cfg = load(sys.argv)
count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
frames, fps = 0, 2.0
for e in extra:
    if e.startswith("video="):
        frames = int(e.split("=")[1])
    if e.startswith("fps="):
        fps = float(e.split("=")[1])
model = train_model(cfg, extra)
vc = raw["vision_config"]
patch, merge, temporal = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
chans = vc.get("in_channels", 3)
factor = patch * merge


def transformers_smart_resize():
    """smart_resize from transformers' image_processing_glm4v.py (the
    module itself imports torchvision and PIL, not installed here): its
    source, run as it is."""
    import inspect
    import re
    import transformers.models.glm4v as pkg
    path = inspect.getfile(pkg).replace("__init__.py", "image_processing_glm4v.py")
    src = open(path).read()
    fn = re.search(r"^def smart_resize\(.*?(?=^(?:def |class |@))", src, re.S | re.M).group(0)
    scope = {"math": math}
    exec(fn, scope)
    return scope["smart_resize"]


smart = transformers_smart_resize()


def smart_resize(t, h, w, temporal, factor, lo, hi):
    return smart(t, h, w, temporal_factor=temporal, factor=factor, min_pixels=lo, max_pixels=hi)


if frames:  # Glm4vVideoProcessor's defaults
    padded = frames + (-frames % temporal)
    rh, rw = smart_resize(padded, height, width, temporal, factor, 112 * 112, 28 * 28 * 2 * 30000)
    groups = padded // temporal
else:  # Glm4vImageProcessor's
    rh, rw = smart_resize(temporal, height, width, temporal, factor, 112 * 112, 28 * 28 * 15000)
    groups = 1
gh, gw = rh // patch, rw // patch
tokens = gh * gw // (merge * merge)
image_id = raw["image_token_id"]
ids = [10 + i % 200 for i in range(seq)]
types = [0] * seq
pos = 1
for _ in range(count):
    if frames:
        ids[pos] = raw.get("video_start_token_id", 294)
        pos += 1
    for g in range(groups):
        ids[pos] = raw["image_start_token_id"]
        for j in range(tokens):
            ids[pos + 1 + j] = image_id
            types[pos + 1 + j] = 2 if frames else 1
        ids[pos + 1 + tokens] = raw["image_end_token_id"]
        pos += tokens + 2
        if frames:  # the group's timestamp: its first frame, int seconds
            stamp = str(int(g * temporal / fps))
            pos += math.ceil(len(stamp) / 3)
    if frames:
        ids[pos] = raw.get("video_end_token_id", 295)
        pos += 1
    pos += 1
assert pos <= seq, "seq too short for the inputs"
pixels = torch.randn(count * groups * gh * gw, chans * temporal * patch * patch)
grid = torch.tensor([[groups, gh, gw]] * count)
kw = dict(input_ids=torch.tensor([ids]), labels=torch.tensor([ids]), mm_token_type_ids=torch.tensor([types], dtype=torch.int32))
if frames:
    kw.update(pixel_values_videos=pixels, video_grid_thw=grid)
else:
    kw.update(pixel_values=pixels, image_grid_thw=grid)
# "atbackward": what the graph still holds when the backward starts (the
# packed tensors of nodes that died with the forward's locals dropped).
measure = saved_at_backward if "atbackward" in extra else saved_bytes
with_inputs, s1 = measure(model, **kw)
text_ids = torch.tensor([ids])
text_ids[text_ids == image_id] = 20
model.zero_grad()
without, s0 = measure(model, input_ids=text_ids, labels=text_ids, mm_token_type_ids=torch.zeros(1, seq, dtype=torch.int32))
print("resized", rh, rw, "grid", groups, gh, gw, "patches", count * groups * gh * gw, "tokens a sample", pos - 1 - count * (3 if frames else 1))
report(with_inputs, s1, without, s0, extra)
