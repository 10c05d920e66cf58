# mllama.py: what autograd saves for the images of a tiny Llama 3.2 Vision
# (transformers 4.57.1, MllamaForConditionalGeneration, sdpa, fp32, on the
# CPU), for sim/mllama_oracle_test.go.
#
#   pip install --target /tmp/tf457 transformers==4.57.1 requests
#   python mllama.py ../../sim/testdata/hf/mllama-tiny.json COUNT SEQ [BATCH] [-v]
#
# COUNT 0 prints the parameter count only. It builds the model from the config, counts its parameters on the meta
# device, then runs one training forward (labels = input_ids, the <|image|>
# tokens -100) twice on the
# same SEQ tokens of BATCH samples: with COUNT images a sample (each an
# <|image|> token in the text, its pixels max_num_tiles tiles of image_size
# pixels as the processor pads them, aspect ratio id 6: 2 x 2 tiles, every
# token attending to every image's tiles) and without (no pixels: the
# cross-attention layers are skipped, as transformers does for text-only
# input). It prints the bytes of the distinct storages saved for backward
# (parameters excluded) in both, and their difference: what the images add.
# The text's attention_mask is None (sdpa runs is_causal).
import collections
import json
import sys

import torch

sys.path.insert(0, "/tmp/tf457")
import transformers  # noqa: E402
from transformers import MllamaConfig, MllamaForConditionalGeneration  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
count, seq = int(sys.argv[2]), int(sys.argv[3])
batch = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-v" else 1
verbose = "-v" in sys.argv
cfg = MllamaConfig(**raw)
for c in (cfg, cfg.vision_config, cfg.text_config):
    c._attn_implementation = "sdpa"
with torch.device("meta"):
    meta = MllamaForConditionalGeneration(cfg)
print("transformers", transformers.__version__, "torch", torch.__version__)
print("params", sum(p.numel() for p in meta.parameters()))
if count == 0:  # the parameter count only (the 11B and 90B configs)
    sys.exit(0)

model = MllamaForConditionalGeneration(cfg).train()
vc = raw["vision_config"]
tiles, size = vc["max_num_tiles"], vc["image_size"]
ids = [10 + i % 200 for i in range(seq)]
for j in range(count):
    ids[1 + j] = raw["image_token_index"]
input_ids = torch.tensor([ids] * batch)
pixels = torch.randn(batch, count, tiles, vc.get("num_channels", 3), size, size)
aspect_ids = torch.full((batch, count), 6, dtype=torch.long)
aspect_mask = torch.ones(batch, count, tiles, dtype=torch.long)
cross_mask = torch.ones(batch, seq, count, tiles, dtype=torch.long)
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


labels = input_ids.clone()
labels[labels == raw["image_token_index"]] = -100  # as trainers mask the image tokens
with_images, s1 = saved_bytes(input_ids=input_ids, labels=labels, pixel_values=pixels, aspect_ratio_ids=aspect_ids,
                              aspect_ratio_mask=aspect_mask, cross_attention_mask=cross_mask)
text_ids = input_ids.clone()
text_ids[text_ids == raw["image_token_index"]] = 20
model.zero_grad()
without, s0 = saved_bytes(input_ids=text_ids, labels=text_ids)
print("saved with images", with_images, "without", without, "images add", with_images - without)
if verbose:
    for v in s1.values():
        print(v)
