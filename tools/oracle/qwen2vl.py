# qwen2vl.py: what autograd saves for the images of a tiny Qwen2-VL or
# Qwen2.5-VL (transformers 5.25.0, Qwen2VLForConditionalGeneration /
# Qwen2_5_VLForConditionalGeneration; sdpa or eager, fp32 or bf16, every
# layer checkpointed or not, torch 2.15.0, on the CPU), for
# sim/qwen2vl_vision_oracle_test.go.
#
#   /work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list] [lora]
#   /work/venv-t/bin/python qwen2vl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the tower's, model.visual), then runs
# one training forward (labels = input_ids) twice on the same SEQ tokens:
# with COUNT images of HEIGHT x WIDTH pixels (their image tokens among the
# text, each image's between vision_start and vision_end, and
# mm_token_type_ids 1 on them, as Qwen2VLProcessor lays them out) and
# without (text tokens in their place). Each image is resized as the
# processor's smart_resize does (round to a multiple of patch * merge
# pixels; qwenvl_inputs.py); the pixel patches are random, in the
# processor's layout, fp32.
# It prints the bytes of the distinct storages saved for backward
# (parameters and buffers excluded) in both, and their difference: what
# the images add (vl_harness.py).
import sys

import torch
from qwenvl_inputs import image_inputs
from vl_harness import load, report, saved_bytes, train_model

raw, cfg = load(sys.argv)
count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
model = train_model(cfg, extra)
input_ids, types, pixels, grid, (gh, gw, tokens) = image_inputs(raw, count, height, width, seq)
with_images, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, pixel_values=pixels, image_grid_thw=grid,
                              mm_token_type_ids=types)
text_ids = input_ids.clone()
text_ids[text_ids == raw["image_token_id"]] = 20
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids, mm_token_type_ids=torch.zeros(1, seq, dtype=torch.int32))
print("grid", gh, gw, "patches", count * gh * gw, "image tokens", count * tokens)
report(with_images, s1, without, s0, extra)
