# llava_next.py: what autograd saves for the images of a tiny LLaVA-NeXT
# (LlavaNextForConditionalGeneration: AnyRes tiles through a CLIP tower)
# or LLaVA-OneVision (LlavaOnevisionForConditionalGeneration: the same
# with a SigLIP tower and anyres_max_9), transformers 5.25.0, torch
# 2.15.0, on the CPU, for sim/llava_next_oracle_test.go.
#
#   /work/venv-t/bin/python llava_next.py CONFIG.json --params
#   /work/venv-t/bin/python llava_next.py CONFIG.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [held] [list] [grads] [lora]
#   /work/venv-t/bin/python llava_next.py CONFIG.json --tokens HxW ...
#   /work/venv-t/bin/python llava_next.py CONFIG.json --video COUNT FRAMES SEQ [bf16] [ckpt] [eager] [images=N]
#
# --params counts the parameters on the meta device (vl_harness.load);
# --tokens prints, for each image size, the pinpoint select_best_resolution
# picks, the tiles through the tower and the image tokens (one image a
# sample).
# Otherwise it runs one training forward (labels = input_ids) twice on
# the same SEQ tokens: with COUNT images of HEIGHT x WIDTH pixels in one
# sample (their placeholders first, as many as the processor's
# _get_number_of_features asks for each, run from processing_llava_next.py
# / processing_llava_onevision.py on the config's pinpoints; OneVision
# gives a sample of several images one tile each and a newline, as its
# processor does with batch_num_images) and without (text tokens in their
# place), and prints the bytes of the storages saved for backward
# (parameters and buffers excluded) that are alive when the backward
# starts (vl_harness.saved_at_backward; "held": every packed storage,
# vl_harness.saved_bytes), and their difference; "grads" prints instead
# the elements that get a gradient, with the images and without. The
# pixel values are random fp32 tiles of image_size, as many an image as
# image_size_to_num_patches counts (the base image and the grid's tiles;
# llava_next_inputs.py).
import json
import math
import sys

import torch
from transformers.image_processing_utils import select_best_resolution

from llava_next_inputs import image_tokens, inputs
from vl_harness import load, report, saved_at_backward, saved_bytes, train_model


if len(sys.argv) > 2 and sys.argv[2] == "--tokens":
    # CONFIG --tokens HxW ...: each size's best resolution, tiles and
    # image tokens (one image a sample)
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(**json.load(open(sys.argv[1])))
    for size in sys.argv[3:]:
        h, w = (int(x) for x in size.split("x"))
        print(size, select_best_resolution((h, w), cfg.image_grid_pinpoints), *image_tokens(cfg, h, w, 1))
    sys.exit(0)

if len(sys.argv) > 2 and sys.argv[2] == "--video":
    # CONFIG --video COUNT FRAMES SEQ [bf16] [ckpt] [eager]: COUNT videos of
    # FRAMES frames of image_size pixels (LlavaOnevisionVideoProcessor's
    # resize), each frame's patches pooled 2 x 2 (apply_pooling) and one
    # image_newline a video: FRAMES x ceil(side / 2)^2 + 1 video tokens
    # (replace_video_token)
    argv = sys.argv[:2] + sys.argv[3:]
    raw, cfg = load(argv[:5] + [""] + argv[5:])  # load reads its options from argv[6:]
    count, frames, seq = (int(a) for a in argv[2:5])
    extra = argv[5:]
    vc = cfg.vision_config
    side = vc.image_size // vc.patch_size
    per = frames * math.ceil(side / 2) ** 2 + 1
    print("video tokens a video", per, "all", count * per)
    model = train_model(cfg, extra)
    tok = cfg.video_token_id
    ids = torch.randint(max(tok, cfg.image_token_id) + 1, cfg.text_config.vocab_size, (1, seq))
    kw = {}
    images = [int(a[len("images="):]) for a in extra if a.startswith("images=")]
    if images:
        # images=N: N images of image_size pixels first (several a sample:
        # one base tile and a newline each), the videos after them; what
        # the videos add to the images'
        n = images[0]
        tiles, img = image_tokens(cfg, vc.image_size, vc.image_size, n)
        ids[0, : n * img] = cfg.image_token_id
        kw = dict(pixel_values=torch.randn(n, tiles, vc.num_channels, vc.image_size, vc.image_size),
                  image_sizes=torch.tensor([[vc.image_size, vc.image_size]] * n), batch_num_images=torch.tensor([n]))
        ids[0, n * img : n * img + count * per] = tok
    else:
        ids[0, : count * per] = tok
    pix = torch.randn(count, frames, vc.num_channels, vc.image_size, vc.image_size)
    with_videos, s1 = saved_at_backward(model, input_ids=ids, labels=ids, pixel_values_videos=pix, **kw)
    text = ids.clone()
    text[text == tok] = tok + 1
    model.zero_grad()
    without, s0 = saved_at_backward(model, input_ids=text, labels=text, **kw)
    report(with_videos, s1, without, s0, extra)
    sys.exit(0)

raw, cfg = load(sys.argv)
count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
ids, kw, tiles, per = inputs(cfg, count, height, width, seq)
best = select_best_resolution((height, width), cfg.image_grid_pinpoints)
print("best resolution", best, "tiles an image", tiles, "image tokens an image", per, "all", count * per)

model = train_model(cfg, extra)
tok = cfg.image_token_id
if "grads" in extra:
    # the elements with a gradient after one step (torch.optim.AdamW makes
    # state for those alone), with the images and on text alone
    for kwargs in (dict(input_ids=ids, labels=ids, **kw), dict(input_ids=torch.where(ids == tok, tok + 2, ids), labels=ids)):
        model.zero_grad(set_to_none=True)
        model(**kwargs).loss.backward()
        none = [n for n, p in model.named_parameters() if p.grad is None]
        print("grads", sum(p.numel() for p in model.parameters() if p.grad is not None), "none", len(none), sum(model.get_parameter(n).numel() for n in none))
        print("  ", " ".join(n for n in none if "language_model" not in n))
    sys.exit(0)
measure = saved_bytes if "held" in extra else saved_at_backward
with_images, s1 = measure(model, input_ids=ids, labels=ids, **kw)
text = ids.clone()
text[text == tok] = tok + 2
model.zero_grad()
without, s0 = measure(model, input_ids=text, labels=text)
report(with_images, s1, without, s0, extra)
