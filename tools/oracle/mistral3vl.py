# mistral3vl.py: what autograd saves for the images of a tiny Mistral 3
# (transformers 5.25.0, Mistral3ForConditionalGeneration: Pixtral's vision
# tower, the projector, a Mistral text model; sdpa or eager, torch 2.15.0,
# on the CPU), for sim/mistral3_vision_oracle_test.go; and of a tiny LLaVA
# with Pixtral's tower (llava-pixtral-tiny.json, LlavaForConditionalGeneration:
# no spatial_merge_size, LLaVA's projector) for sim/llava_pixtral_oracle_test.go.
#
#   /work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list] [lora]
#   /work/venv-t/bin/python mistral3vl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, with the vision tower's and the
# projector's, and whether lm_head is tied), then runs one training
# forward (labels = input_ids) twice on the same SEQ tokens: with COUNT
# images of HEIGHT x WIDTH pixels (their [IMG] tokens among the text, a
# break token after each row, as PixtralProcessor lays them out) and
# without (text tokens in place of the [IMG] ones). It prints the bytes of
# the distinct storages saved for backward (parameters and buffers
# excluded) in both, and their difference: what the images add. Each
# image is resized as PixtralProcessor does: get_resize_output_image_size
# and _num_image_tokens run from image_processing_pixtral.py's source (the
# module itself imports torchvision, absent here), at longest edge
# vision_config.image_size and patch size patch_size x spatial_merge_size;
# the pixel values are random, fp32, [COUNT, 3, height, width] (the tower
# casts them); mistral3vl_inputs.py lays the inputs out. bf16 builds the
# model in bf16; ckpt checkpoints every GradientCheckpointingLayer
# (use_reentrant=False); eager runs eager attention (else sdpa); list
# prints every saved storage. Every packed tensor is held until backward, so that a freed
# storage's reused address hides nothing.
import sys

from mistral3vl_inputs import inputs
from vl_harness import load, report, saved_bytes, train_model

raw, cfg = load(sys.argv)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
model = train_model(cfg, extra)
input_ids, extra_inputs, (rh, rw, gh, gw, tokens) = inputs(raw, count, height, width, seq)
tok = cfg.image_token_id
with_images, s1 = saved_bytes(model, input_ids=input_ids, labels=input_ids, **extra_inputs)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(model, input_ids=text_ids, labels=text_ids)
print("resized", rh, rw, "grid", gh, gw, "patches", count * gh * gw, "image tokens", count * tokens)
report(with_images, s1, without, s0, extra)
