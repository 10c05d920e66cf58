# internvl.py: what autograd saves for the images of a tiny InternVL
# (transformers 5.25.0, InternVLForConditionalGeneration: InternViT, the
# projector, a Qwen2 or Qwen3 text model; sdpa or eager, torch 2.15.0, on
# the CPU), for sim/internvl_vision_oracle_test.go.
#
#   /work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list] [lora]
#   /work/venv-t/bin/python internvl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the vision tower's and the
# projector's, and whether lm_head is tied), then runs one training
# forward (labels = input_ids) twice on the same SEQ tokens: with COUNT
# images of HEIGHT x WIDTH pixels and without (text tokens in place of
# the image ones). It prints the bytes of the distinct storages saved for
# backward (parameters and buffers excluded) in both, and their
# difference: what the images add. Each image is cut into tiles as
# GotOcr2ImageProcessor.crop_image_to_patches does (min_patches 1,
# max_patches 12, a thumbnail when there are several tiles; the grid from
# get_optimal_tiled_canvas, run from image_processing_got_ocr2.py's
# source: the module imports torchvision, absent here); the tiles' pixel
# values are random, fp32, [tiles, 3, image_size, image_size]; in
# input_ids each image is <img>, image_seq_length tokens a tile, </img>
# (InternVLProcessor). bf16 builds the model in bf16; ckpt checkpoints
# every GradientCheckpointingLayer (use_reentrant=False); eager runs
# eager attention (else sdpa); list prints every saved storage. Every
# packed tensor is held until backward, so that a freed storage's reused
# address hides nothing.
import ast
import functools
import os
import sys

import torch
import transformers
from vl_harness import load, report, saved_bytes, train_model


def processor_functions(*names):
    """The named functions of image_processing_got_ocr2.py, run from its source."""
    path = os.path.join(os.path.dirname(transformers.__file__), "models/got_ocr2/image_processing_got_ocr2.py")
    tree = ast.parse(open(path).read())
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    scope = {"lru_cache": functools.lru_cache}
    exec(compile(ast.Module(body=fns, type_ignores=[]), path, "exec"), scope)
    return scope


canvas = processor_functions("get_all_supported_aspect_ratios", "get_optimal_tiled_canvas")["get_optimal_tiled_canvas"]


def tiles(height, width, tile, max_tiles=12):
    cols, rows = canvas((height, width), (tile, tile), 1, max_tiles)
    return cols * rows + 1 if cols * rows > 1 else 1


raw, cfg = load(sys.argv)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
model = train_model(cfg, extra)
side = cfg.vision_config.image_size[0]
n = tiles(height, width, side)
per_tile = (side // cfg.vision_config.patch_size[0]) ** 2 * int(cfg.downsample_ratio ** 2 * 1e6) // 10**6
tok = cfg.image_token_id
ids = [20 + i % 200 for i in range(seq)]
pos = 1
for _ in range(count):
    ids[pos] = 11  # <img>
    pos += 1
    for _ in range(n * per_tile):
        ids[pos] = tok
        pos += 1
    ids[pos] = 12  # </img>
    pos += 2
assert pos <= seq, "seq too short for the images"
input_ids = torch.tensor([ids])
pixels = torch.rand(count * n, 3, side, side)
with_images, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, pixel_values=pixels)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids)
print("tiles", n, "an image; image tokens", count * n * per_tile)
report(with_images, s1, without, s0, extra)
