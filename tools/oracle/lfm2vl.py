# lfm2vl.py: what autograd saves for the images of a tiny LFM2-VL
# (transformers 5.25.0, Lfm2VlForConditionalGeneration: the SigLIP2 NaFlex
# vision tower, the projector, an LFM2 text model; sdpa or eager, fp32 or
# bf16, every layer checkpointed or not, torch 2.15.0, on the CPU), for
# sim/lfm2vl_vision_oracle_test.go.
#
#   /work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list] [lora] [proc=FILE.json]
#   /work/venv-t/bin/python lfm2vl.py CONFIG.json --params
#   /work/venv-t/bin/python lfm2vl.py --tokens [proc=FILE.json] H W [H W ...]
#
# Another release's modelling: pip install --no-deps --target DIR
# transformers==5.23.0, then PYTHONPATH=DIR
# LAYOUT_TRANSFORMERS=/work/venv-t/lib/python3.11/site-packages/transformers
# (5.23.0's image processor inlines the layout functions lfm2vl_inputs.py
# runs; the layout is 5.25.0's).
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the tower's and the projector's, and
# whether lm_head is tied), then runs one training forward (labels =
# input_ids) twice on the same SEQ tokens: with COUNT images of HEIGHT x
# WIDTH pixels laid out as Lfm2VlProcessor lays them out with the image
# processor options in FILE.json (a preprocessor_config.json;
# lfm2vl_inputs.py), and without (text tokens in place of the image's).
# It prints the bytes of the distinct storages saved for backward
# (parameters and buffers excluded) in both, and their difference
# (vl_harness.py). --tokens prints, for each image size, the tiles and
# the tokens an image (special tokens included) the processor's layout
# gives.
import json
import sys

from lfm2vl_inputs import image, inputs, tokens, DEFAULTS


def proc_opts(args):
    """The image processor options of proc=FILE.json: a
    preprocessor_config.json, or a processor_config.json's image_processor
    object with its use_image_special_tokens beside it."""
    f = next((a.split("=", 1)[1] for a in args if a.startswith("proc=")), None)
    raw = json.load(open(f)) if f else {}
    opts = dict(raw.pop("image_processor", {}), **raw)
    return opts


if sys.argv[1] == "--tokens":
    opts = proc_opts(sys.argv[2:])
    nums = [int(a) for a in sys.argv[2:] if not a.startswith("proc=")]
    o = dict(DEFAULTS, **opts)
    for h, w in zip(nums[::2], nums[1::2]):
        shapes, rows, cols, per_tile, for_image = image(h, w, opts)
        one = tokens(rows, cols, per_tile, for_image, o["use_thumbnail"] and (rows > 1 or cols > 1), -1, o["use_image_special_tokens"])
        print(h, w, "grid", rows, cols, "tiles", len(shapes), "patches", [a * b for a, b in shapes], "tokens", len(one), "image tokens", one.count(-1))
    sys.exit(0)

from vl_harness import load, report, saved_bytes, train_model

raw, cfg = load(sys.argv)
count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
model = train_model(cfg, extra)
input_ids, pixels, mask, spatial, (shapes, per_image) = inputs(raw, count, height, width, seq, proc_opts(extra))
tok = cfg.image_token_id
with_images, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, pixel_values=pixels, pixel_attention_mask=mask,
                              spatial_shapes=spatial)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids)
print("tiles an image", len(shapes), "patches", [a * b for a, b in shapes], "padded to", pixels.shape[1], "tokens an image", per_image)
report(with_images, s1, without, s0, extra)
