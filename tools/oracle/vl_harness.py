# vl_harness.py: what mistral3vl.py, internvl.py, qwen2vl.py and idefics3.py share (one training
# step of a tiny vision-language model on the CPU, with and without its
# images): the model built from a config.json with its parameters counted
# on the meta device, the trained model, and the storages autograd saves.
import collections
import json
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText


def load(argv):
    """The raw config.json and its config, sdpa or eager ("eager" among
    argv[6:]), after printing the parameter counts on the meta device;
    exits there when argv[2] is --params."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    raw = json.load(open(argv[1]))
    cfg = AutoConfig.for_model(**raw)
    attn = "eager" if "eager" in argv[6:] else "sdpa"
    for c in (cfg, cfg.vision_config, getattr(cfg, "text_config", cfg)):
        c._attn_implementation = attn
    with torch.device("meta"):
        meta = AutoModelForImageTextToText.from_config(cfg)
    print("transformers", transformers.__version__, "torch", torch.__version__, type(meta).__name__)
    print("params", sum(p.numel() for p in meta.parameters()))
    parts = [n for n in ("vision_tower", "multi_modal_projector", "visual", "vision_model", "connector") if hasattr(meta.model, n)]
    print(*(f"{n} {sum(p.numel() for p in getattr(meta.model, n).parameters())}" for n in parts),
          "lm_head tied", meta.lm_head.weight is meta.model.get_input_embeddings().weight)
    if argv[2] == "--params":
        sys.exit(0)
    return raw, cfg


def train_model(cfg, extra):
    """The model in training mode: bf16 or fp32 ("bf16" in extra), every
    GradientCheckpointingLayer checkpointed with "ckpt" (use_reentrant=False),
    wrapped with "lora" by PEFT's get_peft_model(LoraConfig(r=4, lora_alpha=8,
    target_modules="all-linear")): the towers' and projectors' linears too,
    fp32 adapters (sim/lora_towers_test.go)."""
    dtype = torch.bfloat16 if "bf16" in extra else torch.float32
    model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype).train()
    if "ckpt" in extra:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if "lora" in extra:
        import peft
        model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
    return model


def saved_bytes(model, **kw):
    """The bytes of the distinct storages autograd saves in one forward and
    backward (parameters and buffers excluded), and the storages. Every
    packed tensor is held until backward, so that a freed storage's reused
    address hides nothing."""
    skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
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


def report(with_images, s1, without, s0, extra):
    """Prints both totals and what the images add; with "list" in extra,
    every saved storage."""
    print("saved with images", with_images, "without", without, "images add", with_images - without)
    if "list" in extra:
        for v in s1.values():
            print(v)
        print("--- without")
        for v in s0.values():
            print(v)


def saved_at_backward(model, **kw):
    """saved_bytes as the graph holds them when the backward starts: a weak
    reference to each packed tensor, read after the forward's output (and
    with it image_outputs, whose unread tensors it keeps) is dropped, as a
    training loop that keeps only the loss drops it (llava.py --saved)."""
    import gc
    import weakref
    skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    refs = []

    def pack(t):
        # a detached alias: returning t itself would make each saved output
        # and the node that saves it a reference cycle (node, packed output,
        # its grad_fn: the node) that no collector frees, keeping alive the
        # graph above it (the unread last CLIP layer's with
        # vision_feature_layer -2), which without the hooks dies with the
        # forward's output
        d = t.detach()
        if t.data_ptr() not in skip:
            refs.append(weakref.ref(d))
        return d

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(**kw).loss
    gc.collect()
    saved = collections.OrderedDict()
    for r in refs:
        t = r()
        if t is not None and t.untyped_storage().data_ptr() not in saved:
            saved[t.untyped_storage().data_ptr()] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
    loss.backward()
    return sum(v[2] for v in saved.values()), saved
