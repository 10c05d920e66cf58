# mistral3vl.py: what autograd saves for the images of a tiny Mistral 3
# (transformers 5.25.0, Mistral3ForConditionalGeneration: Pixtral's vision
# tower, the projector, a Mistral text model; sdpa or eager, torch 2.15.0,
# on the CPU), for sim/mistral3_vision_oracle_test.go; and of a tiny LLaVA
# with Pixtral's tower (llava-pixtral-tiny.json, LlavaForConditionalGeneration:
# no spatial_merge_size, LLaVA's projector) for sim/llava_pixtral_oracle_test.go.
#
#   /work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager] [list]
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
import collections
import json
import sys

import torch
import transformers
from mistral3vl_inputs import inputs
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
cfg = AutoConfig.for_model(**raw)
attn = "eager" if "eager" in sys.argv[6:] else "sdpa"
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = attn
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__)
print("params", sum(p.numel() for p in meta.parameters()))
print("vision_tower", sum(p.numel() for p in meta.model.vision_tower.parameters()),
      "multi_modal_projector", sum(p.numel() for p in meta.model.multi_modal_projector.parameters()),
      "lm_head tied", meta.lm_head.weight is meta.model.language_model.embed_tokens.weight)
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
dtype = torch.bfloat16 if "bf16" in extra else torch.float32
model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype).train()
if "ckpt" in extra:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
input_ids, extra_inputs, (rh, rw, gh, gw, tokens) = inputs(raw, count, height, width, seq)
tok = cfg.image_token_id
skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}


def saved_bytes(**kw):
    saved, keep = collections.OrderedDict(), []

    def pack(t):
        keep.append(t)
        if t.data_ptr() not in skip:
            key = t.untyped_storage().data_ptr()
            if key not in saved:
                saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    return sum(v[2] for v in saved.values()), saved


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, **extra_inputs)
text_ids = input_ids.clone()
text_ids[text_ids == tok] = 30
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("resized", rh, rw, "grid", gh, gw, "patches", count * gh * gw, "image tokens", count * tokens)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
