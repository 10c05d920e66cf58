# llava.py: LlavaForConditionalGeneration's parameters, and which of its
# weights get a gradient in a training step with images (transformers
# 5.25.0, torch 2.15.0, on the CPU), for sim/hfconfig_llava_test.go.
#
#   /work/venv-t/bin/python llava.py CONFIG.json --params
#   /work/venv-t/bin/python llava.py CONFIG.json --grads COUNT [bf16] [eager]
#   /work/venv-t/bin/python llava.py CONFIG.json --saved COUNT SEQ [bf16] [eager] [list]
#
# --params counts the parameters on the meta device, with the vision
# tower's and the projector's, and whether lm_head is tied. --grads builds
# the model (fp32, or bf16), runs one training forward (labels =
# input_ids) on COUNT random images of image_size pixels, their
# placeholders first in a text of twice their tokens, then backward, and
# lists the trainable parameters whose .grad is None (with
# vision_feature_layer -2: the last encoder layer and post_layernorm,
# which run but whose outputs nothing reads).
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
cfg = AutoConfig.for_model(**raw)
attn = "eager" if "eager" in sys.argv[3:] else "sdpa"
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

count = int(sys.argv[3])
dtype = torch.bfloat16 if "bf16" in sys.argv[4:] else torch.float32
model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype).train()
vc = cfg.vision_config
side = vc.image_size // vc.patch_size
per = side * side + (1 if cfg.vision_feature_select_strategy == "full" else 0)
seq = 2 * count * per
ids = torch.randint(cfg.image_token_id + 1, cfg.text_config.vocab_size, (1, seq))
ids[0, : count * per] = cfg.image_token_id
pix = torch.randn(count, vc.num_channels, vc.image_size, vc.image_size)
out = model(input_ids=ids, pixel_values=pix, labels=ids)
out.loss.backward()
if sys.argv[2] == "--saved":
    # what the graph holds when the backward starts, the forward's output
    # (and with it image_outputs, which holds the unread last layer's
    # graph) dropped, as a loop that keeps only the loss drops it
    from vl_harness import saved_at_backward as saved_bytes
    seq = int(sys.argv[4])

    ids = torch.randint(cfg.image_token_id + 1, cfg.text_config.vocab_size, (1, seq))
    ids[0, : count * per] = cfg.image_token_id
    w, s1 = saved_bytes(model, input_ids=ids, pixel_values=pix, labels=ids)
    text = ids.clone()
    text[text == cfg.image_token_id] = cfg.image_token_id + 1
    model.zero_grad()
    wo, s0 = saved_bytes(model, input_ids=text, labels=text)
    print("saved with images", w, "without", wo, "images add", w - wo)
    if "list" in sys.argv:
        for v in s1.values():
            print(v)
    sys.exit(0)
none = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
print("no grad", len(none), sum(model.get_parameter(n).numel() for n in none))
for n in none:
    print(" ", n)
