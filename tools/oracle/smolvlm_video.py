# smolvlm_video.py: what autograd saves for the videos of a tiny SmolVLM
# (SmolVLM2: transformers 5.25.0, SmolVLMForConditionalGeneration; sdpa or
# eager, fp32 or bf16, every layer checkpointed or not, torch 2.15.0, on
# the CPU), for sim/idefics3_vision_oracle_test.go.
#
#   /work/venv-t/bin/python smolvlm_video.py ../../sim/testdata/hf/smolvlm-tiny.json COUNT FRAMES SEQ [bf16] [ckpt] [eager] [list]
#
# SmolVLMVideoProcessor resizes every sampled frame to a square of
# max_image_size["longest_edge"] (the tile, vision_config.image_size, as
# the hub's processors set it), whatever the video's size, and pads
# nothing when all frames are one size: pixel_values fp32 [1, COUNT x
# FRAMES, 3, tile, tile], pixel_attention_mask int64 ones of [1, COUNT x
# FRAMES, tile, tile]. SmolVLMProcessor.replace_video_token writes each
# frame as "\nFrame from MM:SS:" and one unsplit image
# (_prompt_single_image: <fake_token_around_image>, <global-img>,
# image_seq_len <image>, <fake_token_around_image>); the text around the
# frames is arbitrary ids here (its count is the tokenizer's, not the
# model's). One training forward (labels = input_ids) runs with the videos
# and again with text tokens in place of the <image> ones; it prints the
# bytes of the distinct storages saved for backward in both, and their
# difference: what the videos add (vl_harness.py).
import sys

from idefics3_inputs import place
from vl_harness import load, report, saved_bytes, train_model

raw, cfg = load(sys.argv[:5] + [""] + sys.argv[5:])  # load reads its options from argv[6:]
count, frames, seq = (int(a) for a in sys.argv[2:5])
extra = sys.argv[5:]
model = train_model(cfg, extra)
vc = raw["vision_config"]
tile, patch, scale = vc["image_size"], vc["patch_size"], raw.get("scale_factor", 2)
per_tile = (tile // patch) ** 2 // scale**2
fake, glob, tok = 11, 12, cfg.image_token_id
stamp = [20, 21, 22, 23, 24, 25]  # "\nFrame from 00:01:": arbitrary text ids
one = []
for _ in range(frames):
    one += stamp + [fake, glob] + [tok] * per_tile + [fake]
input_ids, pixels, mask = place(one, count, count * frames, seq, vc)
with_videos, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, pixel_values=pixels, pixel_attention_mask=mask)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids)
print("tiles", count * frames, "image tokens a tile", per_tile, "tokens a frame with its tags", per_tile + 3)
report(with_videos, s1, without, s0, extra)
