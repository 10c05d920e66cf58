# idefics3.py: what autograd saves for the images of a tiny Idefics3 or
# SmolVLM (transformers 5.25.0, Idefics3ForConditionalGeneration /
# SmolVLMForConditionalGeneration: the SigLIP vision model, the connector,
# a Llama text model; sdpa or eager, fp32 or bf16, every layer
# checkpointed or not, torch 2.15.0, on the CPU), for
# sim/idefics3_vision_oracle_test.go.
#
#   /work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list] [lora] [longest=N] [nosplit]
#   /work/venv-t/bin/python idefics3.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the vision model's and the
# connector's, and whether lm_head is tied), then runs one training
# forward (labels = input_ids) twice on the same SEQ tokens: with COUNT
# images of HEIGHT x WIDTH pixels, each cut into tiles as the processor
# cuts it (idefics3_inputs.py), and without (text tokens in place of the
# <image> ones). It prints the bytes of the distinct storages saved for
# backward (parameters and buffers excluded) in both, and their
# difference: what the images add (vl_harness.py). longest=N is the
# processor's size["longest_edge"] (default 4 x image_size), nosplit its
# do_image_splitting=False.
import sys

from idefics3_inputs import inputs
from vl_harness import load, report, saved_bytes, train_model

raw, cfg = load(sys.argv)
count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
longest = next((int(a.split("=")[1]) for a in extra if a.startswith("longest=")), None)
model = train_model(cfg, extra)
input_ids, pixels, mask, (rows, cols, tiles, per_tile, tokens) = inputs(raw, count, height, width, seq, longest, "nosplit" not in extra)
tok = cfg.image_token_id
with_images, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, pixel_values=pixels, pixel_attention_mask=mask)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids)
print("grid", rows, cols, "tiles", count * tiles, "image tokens a tile", per_tile, "tokens an image", tokens)
report(with_images, s1, without, s0, extra)
