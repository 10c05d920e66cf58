# qwen3vl.py: what autograd saves for the images of a tiny Qwen3-VL or
# Qwen3.5 VL (transformers 5.17.0, Qwen3VLForConditionalGeneration /
# Qwen3VLMoeForConditionalGeneration / Qwen3_5ForConditionalGeneration,
# sdpa, fp32, torch 2.15.0, on the CPU), for sim/vision_qwen3_oracle_test.go.
#
#   /work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [list] [lora]
#   /work/venv-t/bin/python qwen3vl.py CONFIG.json --params
#
# It builds the model from the config, counts its parameters on the meta
# device (--params: only that, for the hub's configs), then runs one
# training forward (labels = input_ids) twice on the same SEQ tokens: with
# COUNT images of HEIGHT x WIDTH pixels (their image tokens among the text,
# each between vision_start and vision_end, mm_token_type_ids 1 on them)
# and without (text tokens in their place). It prints the bytes of the
# distinct storages saved for backward (parameters excluded) in both, and
# their difference: what the images add. Each image is resized as the
# processor's smart_resize does (round to a multiple of patch * merge
# pixels); the pixel patches are random, in the processor's layout, fp32.
# bf16 builds the model in bf16 (model.to(torch.bfloat16), as a pure-bf16
# run loads it); list prints every saved storage.
import collections
import json
import sys

import torch
import transformers
from qwenvl_inputs import image_inputs
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
cfg = AutoConfig.for_model(**raw)
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = "sdpa"
with torch.device("meta"):
    meta = AutoModelForImageTextToText.from_config(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__)
print("params", sum(p.numel() for p in meta.parameters()))
print("visual", sum(p.numel() for p in meta.model.visual.parameters()))
if sys.argv[2] == "--params":
    sys.exit(0)

count, height, width, seq = (int(a) for a in sys.argv[2:6])
extra = sys.argv[6:]
model = AutoModelForImageTextToText.from_config(cfg)
if "bf16" in extra:
    model = model.to(torch.bfloat16)
model = model.train()
if "lora" in extra:  # PEFT's all-linear (r=4, alpha=8, fp32 adapters), the tower's and merger's linears too
    import peft
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
input_ids, mm_types, pixels, grid, (gh, gw, tokens) = image_inputs(raw, count, height, width, seq)
per_image = gh * gw
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


with_images, s1 = saved_bytes(input_ids=input_ids, labels=input_ids, pixel_values=pixels, image_grid_thw=grid, mm_token_type_ids=mm_types)
text_ids = input_ids.clone()
text_ids[text_ids == raw["image_token_id"]] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("grid", gh, gw, "patches", count * per_image, "image tokens", count * tokens)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if "list" in extra:
    for v in s1.values():
        print(v)
    print("--- without")
    for v in s0.values():
        print(v)
