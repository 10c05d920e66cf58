# qwenvl_video.py: what autograd saves for the videos of a tiny Qwen2-VL, Qwen2.5-VL,
# Qwen3-VL, Qwen3-VL-MoE or Qwen3.5 VL (AutoModelForImageTextToText, sdpa,
# fp32, on the CPU), for sim/vision_video_oracle_test.go.
#
#   /work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json COUNT FRAMES HEIGHT WIDTH SEQ [FPS] [images=N] [bf16] [list]
#
# It builds the model from the config and runs one training forward
# (labels = input_ids) twice on the same SEQ tokens: with COUNT videos of
# FRAMES sampled frames of HEIGHT x WIDTH pixels (pixel_values_videos and
# video_grid_thw as the video processor makes them: the frames padded to a
# multiple of temporal_patch_size by repeating the last, each resized to a
# multiple of patch * merge pixels (smart_resize's rounding); the patches
# random, fp32) and without (text tokens in their place). The video tokens
# sit among the text as the processor writes them: Qwen2-VL's and Qwen2.5-VL's between one
# vision_start and vision_end; Qwen3-VL's processor (also Qwen3.5's) puts
# each temporal patch group's tokens between vision_start and vision_end
# after a "<t seconds>" timestamp, which stands here as text tokens, as
# many as the timestamp's pre-tokens under Qwen2's tokenizer (one a digit,
# "<", ".", " seconds", ">"); the timestamps are the processor's
# _calculate_timestamps of frames sampled FPS a second (index i at i / FPS
# seconds). images=N adds N images of HEIGHT x WIDTH (their tokens first)
# to both runs; bf16 builds the model in bf16 (model.to(torch.bfloat16),
# as a pure-bf16 run loads it; the pixel patches stay fp32). It prints the bytes of the distinct storages saved for
# backward (parameters excluded) in both, and their difference: what the
# videos add; with list, every saved storage.
import collections
import json
import re
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
count, frames, height, width, seq = (int(a) for a in sys.argv[2:7])
extra = sys.argv[7:]
fps = float(extra[0]) if extra and re.fullmatch(r"[0-9.]+", extra[0]) else 2.0
n_images = 0
for e in extra:
    if e.startswith("images="):
        n_images = int(e.split("=")[1])
cfg = AutoConfig.for_model(**raw)
for c in (cfg, cfg.vision_config, getattr(cfg, "text_config", cfg)):
    c._attn_implementation = "sdpa"
model = AutoModelForImageTextToText.from_config(cfg)
if "bf16" in extra:
    model = model.to(torch.bfloat16)
model = model.train()
print("transformers", transformers.__version__, "torch", torch.__version__, type(model).__name__)
qwen3 = raw["model_type"] not in ("qwen2_vl", "qwen2_5_vl")
vc = raw["vision_config"]
patch, merge, temporal = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
chans = vc.get("in_channels", vc.get("in_chans", 3))
factor = patch * merge
gh, gw = max(round(height / factor), 1) * merge, max(round(width / factor), 1) * merge
per_frame = gh * gw
frame_tokens = per_frame // (merge * merge)
groups = -(-frames // temporal)

stamps = []
if qwen3:
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    indices = list(range(frames))
    # the processor's own arithmetic, on frames sampled fps a second
    times = Qwen3VLProcessor._calculate_timestamps(None, indices, fps, temporal)
    stamps = [f"<{t:.1f} seconds>" for t in times]


def stamp_tokens(s):
    # "<", each digit, ".", " seconds", ">": Qwen2's pre-tokenizer splits
    # every digit, the rest are single vocabulary entries
    return len(re.findall(r"[0-9]", s)) + 4


ids = [10 + i % 200 for i in range(seq)]
types = [0] * seq
pos = 1
for _ in range(n_images):
    ids[pos] = raw["vision_start_token_id"]
    for j in range(frame_tokens):
        ids[pos + 1 + j] = raw["image_token_id"]
        types[pos + 1 + j] = 1
    ids[pos + 1 + frame_tokens] = raw["vision_end_token_id"]
    pos += frame_tokens + 3
added = 0
for _ in range(count):
    if not qwen3:
        ids[pos] = raw["vision_start_token_id"]
        for j in range(groups * frame_tokens):
            ids[pos + 1 + j] = raw["video_token_id"]
            types[pos + 1 + j] = 2
        ids[pos + 1 + groups * frame_tokens] = raw["vision_end_token_id"]
        pos += groups * frame_tokens + 3
        added += groups * frame_tokens
        continue
    for s in stamps:
        pos += stamp_tokens(s)  # the timestamp's text tokens
        ids[pos] = raw["vision_start_token_id"]
        for j in range(frame_tokens):
            ids[pos + 1 + j] = raw["video_token_id"]
            types[pos + 1 + j] = 2
        ids[pos + 1 + frame_tokens] = raw["vision_end_token_id"]
        pos += frame_tokens + 2
        added += stamp_tokens(s) + frame_tokens + 2
    pos += 1
assert pos <= seq, f"seq too short for the videos ({pos})"
input_ids = torch.tensor([ids])
mm_types = torch.tensor([types], dtype=torch.int32)
vpix = torch.randn(count * groups * per_frame, chans * temporal * patch * patch)
vgrid = torch.tensor([[groups, gh, gw]] * count)
params = {p.data_ptr() for p in model.parameters()}


def saved_bytes(**kw):
    saved = collections.OrderedDict()

    def pack(t):
        if t.data_ptr() not in params:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


base = {}
if n_images:
    base = dict(pixel_values=torch.randn(n_images * per_frame, chans * temporal * patch * patch),
                image_grid_thw=torch.tensor([[1, gh, gw]] * n_images))
kw = dict(base, input_ids=input_ids, labels=input_ids, pixel_values_videos=vpix, video_grid_thw=vgrid, mm_token_type_ids=mm_types)
if raw["model_type"] == "qwen2_5_vl":  # Qwen2-VL's rope has no time scale
    kw["second_per_grid_ts"] = torch.tensor([temporal / fps] * count)
with_videos, s1 = saved_bytes(**kw)
text_ids = input_ids.clone()
text_ids[text_ids == raw["video_token_id"]] = 20
text_types = mm_types.clone()
text_types[text_types == 2] = 0
model.zero_grad()
without, s0 = saved_bytes(**dict(base, input_ids=text_ids, labels=text_ids, mm_token_type_ids=text_types))
print("grid", groups, gh, gw, "patches", count * groups * per_frame, "video tokens", count * groups * frame_tokens, "tokens added", added)
print("timestamps", stamps)
print("saved with videos", with_videos, "without", without, "videos add", with_videos - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
