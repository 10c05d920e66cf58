"""PyTorch's own FLOP count of one training step, per module, forward, backward and recompute: the figures
sim/flops_torch_test.go holds memsh's per-module FLOPs against (issue 20).

    /work/venv-t/bin/python tools/oracle/flops.py --out sim/testdata/flops_torch.jsonl   # torch 2.15.0, transformers 5.17.0, peft 0.21.2

Each case builds a transformers model from a tiny config (sim/testdata/hf/flops/*.json, or one of
sim/testdata/hf; Qwen2.5-VL with one 112 x 112 image, laid out as qwen25vl.py does; Llama 4 with two 112 x 56
images, 3 tiles each, as llama4vis.py lays them out; Kimi K2.5 with two 84 x 112 images, 6 x 8 patches each,
as kimivis.py lays them out; Gemma 4 with two 64 x 96 images as gemma4vl.py lays them out; Gemma 3 with two
images and their token_type_ids as gemma3vl.py lays them out; Mistral 3 with two 84 x 112 images as
mistral3vl.py lays them out; Gemma 3n's text model, gemma3n-tiny.json, transformers 5.25.0: --cases gemma3n,
appended; HunYuan MoE, MiniMax-M2, dots.llm1, Arcee and Apertus, 5.25.0: --cases
hunyuan_v1_moe_grouped,minimax_m2_grouped,dots1_grouped,arcee,apertus, appended; HunYuan dense: --cases
hunyuan_v1_dense, appended; DeBERTa-v3 MaskedLM,
deberta-v3-tiny.json, eager, 5.25.0: --cases deberta_v2, appended; its sequence and token classification
heads, -cls and -tok, random labels of 2 classes: --cases deberta_v2_cls,deberta_v2_tok, appended; Kimi Linear,
kimi_linear-tiny.json, 5.25.0 without flash-linear-attention: --cases kimi_linear_grouped, appended; LFM2-VL with one
50 x 70 image under the case's processor options, laid out as lfm2vl.py does, 5.25.0: --cases lfm2_vl_vision, appended;
Ling 3, bailing_hybrid-tiny.json, without flash-linear-attention: --cases bailing_hybrid_grouped, appended;
LongCat-Flash, longcat-flash-tiny.json, 5.25.0: --cases longcat_flash_grouped, appended; Mistral 4,
mistral4-tiny.json, 5.25.0: --cases mistral4_grouped, appended; Solar Open, solar_open-tiny.json, 5.25.0:
--cases solar_open_grouped, appended; K-EXAONE, exaone_moe-tiny.json, 5.25.0: --cases exaone_moe_grouped,
appended; Phi-3 and GLM-4 with their
one gate_up_proj, phi3-tiny.json and glm4-tiny.json, 5.25.0: --cases phi3,glm4, appended; AFMoE, afmoe-tiny.json,
5.25.0: --cases afmoe_grouped, appended)
on the CPU in fp32, runs
model(input_ids, labels=input_ids).loss (a classification head's labels: random classes) and loss.backward() once,
and counts FLOPs with torch.utils.flop_counter.FlopCounterMode's own formulas (its flop_registry: mm,
addmm, bmm, baddbmm, convolution and its backward, every SDPA kernel and its backward). FlopCounterMode
counts no elementwise op, norm, softmax or loss.

What this harness adds to FlopCounterMode, and why:
- Attribution. FlopCounterMode's ModuleTracker gives every backward op to whichever modules' grad hooks
  have fired so far, which over-counts inputs shared by siblings (q/k/v_proj: k_proj's backward came out
  at 6 x its forward, layer 1's attention at the whole layer). Here each forward op is given to the
  innermost module running it (global forward hooks), each autograd node made in the forward is tagged with
  that module (a TorchFunctionMode sets grad_fn.metadata; nodes made inside a composite op inherit their
  consumer's tag), and each backward op goes to the module of the node autograd is running
  (torch._C._current_autograd_node()). An op that runs while a module's forward is active during
  loss.backward() is a checkpoint's recompute.
- aten._grouped_mm (transformers 5's grouped_mm experts) has no formula in torch 2.15's FlopCounterMode
  (it counts 0); it is counted here as 2 x rows x K x N (a 2-D by 3-D product, or a 2-D by 2-D one whose
  inner dimension is split by offs), under the key "aten._grouped_mm (harness formula)".
- aten.convolution_backward's weight gradient is divided by groups (conv_backward_flop below: torch 2.15
  counts a depthwise conv's weight gradient as a dense one), under "aten.convolution_backward (harness
  formula: grad_weight / groups)".
- Ops without a formula that do matmul-like work are listed in "uncounted" (name: calls).

One JSON line per case: name, config file, attn, options, batch, seq, and forward / backward / recompute as
{module path: {aten op: FLOPs}}, module paths as the model's named_modules() spells them ("" = the root)."""
import argparse
import collections
import json
import os
import sys

import torch
import torch.utils.checkpoint
from torch.overrides import TorchFunctionMode
import torch.utils.flop_counter
from torch.utils.flop_counter import FlopCounterMode
import transformers

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

# name, config file (under sim/testdata/hf), attention, options
CASES = [
    ("llama_sdpa", "llama-gqa-tiny.json", "sdpa", {}),
    ("llama_eager", "llama-gqa-tiny.json", "eager", {}),
    ("llama_ckpt", "llama-gqa-tiny.json", "sdpa", {"checkpoint": True}),
    ("llama_lora", "llama-gqa-tiny.json", "sdpa", {"lora": ["q_proj", "v_proj"]}),
    ("gpt2", "flops/gpt2-tiny.json", "sdpa", {}),
    ("bert", "flops/bert-tiny.json", "sdpa", {}),
    ("mixtral_eager", "flops/mixtral-tiny.json", "sdpa", {"experts": "eager"}),
    ("qwen3_moe_grouped", "flops/qwen3-moe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("deepseek_v3", "flops/deepseek-v3-tiny.json", "sdpa", {"experts": "eager"}),
    ("deepseek_v2", "flops/deepseek-v2-tiny.json", "sdpa", {"experts": "eager"}),
    ("mamba2", "flops/mamba2-tiny.json", "eager", {}),
    ("qwen3_next", "qwen3-next-tiny.json", "eager", {"experts": "eager"}),
    ("qwen25_vl", "qwen2.5-vl-tiny.json", "sdpa", {"images": [1, 112, 112], "batch": 1}),
    ("llama4_vision", "llama4-vision-tiny.json", "sdpa", {"images": [2, 112, 56], "batch": 1}),
    ("kimi_k25_vision", "kimi-k2.5-tiny.json", "sdpa", {"images": [2, 84, 112], "batch": 1}),
    ("gemma4_vision", "gemma4-vl-tiny.json", "sdpa", {"images": [2, 64, 96], "batch": 1}),
    ("gemma3_vision", "gemma3-vl-tiny.json", "sdpa", {"images": [2, 64, 64], "batch": 1}),
    ("mistral3_vision", "mistral3-tiny.json", "sdpa", {"images": [2, 84, 112], "batch": 1}),
    ("qwen2_vl", "qwen2-vl-tiny.json", "sdpa", {"images": [1, 112, 112], "batch": 1}),
    ("idefics3_vision", "idefics3-tiny.json", "sdpa", {"images": [1, 50, 70], "batch": 1, "seq": 128}),
    ("smolvlm_vision", "smolvlm-tiny.json", "sdpa", {"images": [1, 50, 70], "batch": 1, "seq": 128}),
    ("llava_next_vision", "llava-next-tiny.json", "sdpa", {"images": [1, 60, 150], "batch": 1}),
    ("llava_onevision_vision", "llava-onevision-tiny.json", "sdpa", {"images": [1, 64, 160], "batch": 1, "seq": 128}),
    ("lfm2_vl_vision", "lfm2_vl-tiny.json", "sdpa", {"images": [1, 50, 70], "batch": 1, "seq": 128, "processor": {
        "encoder_patch_size": 4, "tile_size": 32, "min_image_tokens": 4, "max_image_tokens": 16, "min_tiles": 2, "max_tiles": 4}}),
    ("granite", "granite-tiny.json", "sdpa", {}),
    ("granite_ckpt", "granite-tiny.json", "sdpa", {"checkpoint": True}),
    ("granitemoe_grouped", "granitemoe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("granitemoehybrid", "granitemoehybrid-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("olmoe_grouped", "olmoe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("gemma3n", "gemma3n-tiny.json", "sdpa", {}),
    ("deepseek_v4", "deepseek-v4-tiny.json", "eager", {"experts": "grouped_mm"}),
    ("lfm2", "lfm2-tiny.json", "sdpa", {}),
    ("lfm2_moe_grouped", "lfm2_moe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("hunyuan_v1_dense", "hunyuan_v1_dense-tiny.json", "sdpa", {}),
    ("hunyuan_v1_moe_grouped", "hunyuan_v1_moe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("minimax_m2_grouped", "minimax_m2-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("dots1_grouped", "dots1-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("arcee", "arcee-tiny.json", "sdpa", {}),
    ("phi3", "phi3-tiny.json", "sdpa", {}),
    ("glm4", "glm4-tiny.json", "sdpa", {}),
    ("apertus", "apertus-tiny.json", "sdpa", {}),
    ("deberta_v2", "deberta-v3-tiny.json", "eager", {}),
    ("deberta_v2_cls", "deberta-v3-tiny-cls.json", "eager", {"labels": "sequence"}),
    ("deberta_v2_tok", "deberta-v3-tiny-tok.json", "eager", {"labels": "token"}),
    ("kimi_linear_grouped", "kimi_linear-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("bailing_hybrid_grouped", "bailing_hybrid-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("longcat_flash_grouped", "longcat-flash-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("mistral4_grouped", "mistral4-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("solar_open_grouped", "solar_open-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("afmoe_grouped", "afmoe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
    ("exaone_moe_grouped", "exaone_moe-tiny.json", "sdpa", {"experts": "grouped_mm"}),
]

MATMUL_LIKE = ("_grouped_mm", "matmul", "einsum", "linear", "conv", "attention", "_scaled_mm", "solve_triangular")


def grouped_mm_flop(a, b, *args, out_shape=None, **kwargs):
    """aten._grouped_mm(mat_a, mat_b, offs): shapes only (FlopCounterMode's shape_wrapper)."""
    if len(a) == 2 and len(b) == 3:  # rows by expert: [M, K] x [G, K, N]
        return 2 * a[0] * a[1] * b[2]
    if len(a) == 2 and len(b) == 2:  # the weight gradient: [K, M] x [M, N] -> [G, K, N], M split by offs
        return 2 * a[0] * a[1] * b[1]
    if len(a) == 3 and len(b) == 3:  # batched
        return 2 * a[0] * a[1] * a[2] * b[2]
    if len(a) == 3 and len(b) == 2:  # [G, M, K] x [K, N*G]... not met here
        return 2 * a[0] * a[1] * a[2] * b[-1]
    raise ValueError(f"_grouped_mm shapes {a} {b}")


def conv_backward_flop(grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups,
                       output_mask, out_shape=None, **kwargs):
    """aten.convolution_backward with the weight gradient divided by groups: torch 2.15's formula counts it as
    a dense convolution of the transposed input with the transposed output gradient, c_out x c_in channels
    with no groups, so a depthwise conv (Mamba's and Gated DeltaNet's causal conv1d, groups = channels)
    comes out channels times too large; its input gradient (the weight's c_in already per group) is right."""
    args = (grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
    gi = torch.utils.flop_counter.conv_backward_flop(*args, [output_mask[0], False, False], out_val=out_shape)
    gw = torch.utils.flop_counter.conv_backward_flop(*args, [False, output_mask[1], False], out_val=out_shape)
    return gi + gw // groups


class Where:
    """Which module runs now: a stack kept by global forward hooks."""

    def __init__(self, model):
        self.names = {id(m): n for n, m in model.named_modules()}
        self.stack = []
        self.phase = "forward"
        self.recomputing = []  # the stack's depth when each recomputation began
        self.track_recompute()
        self.handles = [
            torch.nn.modules.module.register_module_forward_pre_hook(self.pre),
            torch.nn.modules.module.register_module_forward_hook(self.post),
        ]

    def pre(self, mod, inp):
        # A module the model does not hold (the kernel hub's wrapper
        # around LFM2's causal_conv1d_fn, made as it is called) runs for
        # the module that called it.
        name = self.names.get(id(mod))
        if name is None:
            name = self.stack[-1] if self.stack else "?" + type(mod).__name__
        self.stack.append(name)

    def post(self, mod, inp, out):
        self.stack.pop()

    def top(self):
        return self.stack[-1] if self.stack else "<outside>"

    def close(self):
        for h in self.handles:
            h.remove()
        torch.utils.checkpoint._recomputation_hook = self.orig

    def track_recompute(self):
        """Marks checkpoint's recomputation: its forward runs under torch.utils.checkpoint's
        _recomputation_hook, and stops early (_StopRecomputationError from a pack hook, the default
        early_stop=True) once the last saved tensor is made again, so the modules it was in never see their
        forward hooks' end: the stack is cut back when the hook's context exits."""
        where, self.orig = self, torch.utils.checkpoint._recomputation_hook

        class Hook(self.orig):
            def __enter__(self):
                where.recomputing.append(len(where.stack))
                return super().__enter__()

            def __exit__(self, *exc):
                del where.stack[where.recomputing.pop():]
                return super().__exit__(*exc)

        torch.utils.checkpoint._recomputation_hook = Hook


class Tag(TorchFunctionMode):
    """Tags each autograd node a torch function makes with the module running it."""

    def __init__(self, where):
        super().__init__()
        self.where = where

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.where.phase == "forward":
            mod = self.where.top()
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                    t.grad_fn.metadata.setdefault("module", mod)
        return out


def propagate(root):
    """Nodes made inside a composite op (no tag) take the tag of their first consumer."""
    seen, queue = {root}, collections.deque([root])
    while queue:
        n = queue.popleft()
        tag = n.metadata.get("module", "<untagged>")
        for nxt, _ in n.next_functions:
            if nxt is None or nxt in seen:
                continue
            seen.add(nxt)
            nxt.metadata.setdefault("module", tag)
            queue.append(nxt)


class Counter(FlopCounterMode):
    def __init__(self, where):
        super().__init__(display=False, custom_mapping={
            torch.ops.aten._grouped_mm: grouped_mm_flop, torch.ops.aten.convolution_backward: conv_backward_flop})
        self.where = where
        self.rows = {p: collections.defaultdict(collections.Counter) for p in ("forward", "backward", "recompute")}
        self.uncounted = collections.Counter()

    def _count_flops(self, func_packet, out, args, kwargs):
        if func_packet not in self.flop_registry:
            name = str(func_packet)
            if any(k in name for k in MATMUL_LIKE):
                self.uncounted[name] += 1
            return out
        n = self.flop_registry[func_packet](*args, **kwargs, out_val=out)
        key = str(func_packet)
        if func_packet is torch.ops.aten._grouped_mm:
            key += " (harness formula)"
        if func_packet is torch.ops.aten.convolution_backward:
            key += " (harness formula: grad_weight / groups)"
        w = self.where
        if w.phase == "forward":
            self.rows["forward"][w.top()][key] += n
        elif w.recomputing:
            self.rows["recompute"][w.top()][key] += n
        else:
            node = torch._C._current_autograd_node()
            mod = node.metadata.get("module", "<untagged>") if node is not None else "<no node>"
            self.rows["backward"][mod][key] += n
        return super()._count_flops(func_packet, out, args, kwargs)  # FlopCounterMode's own Global total


def build(case):
    name, file, attn, opts = case
    with open(os.path.join(HF, file)) as f:
        raw = json.load(f)
    cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("transformers_version", "vision_soft_tokens_per_image")})
    cfg._attn_implementation = attn
    if "experts" in opts:
        cfg._experts_implementation = opts["experts"]
    for sub in ("vision_config", "text_config"):
        if hasattr(cfg, sub):
            getattr(cfg, sub)._attn_implementation = attn
    torch.manual_seed(0)
    arch = raw["architectures"][0]
    model = getattr(transformers, arch)(cfg).float()
    if opts.get("checkpoint"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if "lora" in opts:
        import peft
        lc = peft.LoraConfig(r=4, lora_alpha=8, target_modules=opts["lora"], lora_dropout=0.0)
        model = peft.get_peft_model(model, lc)
    model.train()
    return raw, model


def llama4_inputs(raw, count, height, width, seq):
    """input_ids with count images of height x width as tools/oracle/llama4vis.py lays them out (each image's
    tiles from Llama4ImageProcessor's get_best_fit, their <|patch|> tokens), and the tiles' pixel values."""
    import llama4vis_tiles
    vc = raw["vision_config"]
    tiles = llama4vis_tiles.tiles(height, width, vc["image_size"])
    per_tile = (vc["image_size"] // vc["patch_size"]) ** 2 // int(round(1 / vc["pixel_shuffle_ratio"] ** 2))
    ids = [10 + i % 80 for i in range(seq)]
    pos = 1
    for _ in range(count):
        for j in range(tiles * per_tile):
            ids[pos + j] = raw["image_token_index"]
        pos += tiles * per_tile + 2
    assert pos <= seq, "seq too short for the images"
    pixels = torch.randn(count * tiles, vc.get("num_channels", 3), vc["image_size"], vc["image_size"])
    return torch.tensor([ids]), {"pixel_values": pixels}


def kimi_inputs(raw, count, height, width, seq):
    """input_ids with count images of height x width as tools/oracle/kimivis.py lays them out (each image's
    grid from Kimi_K25ImageProcessor's navit_resize, its image tokens), the pixel patches and image_grid_thw."""
    import kimivis_resize
    vc = raw["vision_config"]
    patch, merge = vc["patch_size"], vc["merge_kernel_size"][0]
    gh, gw = kimivis_resize.grid(height, width, patch, merge)
    tokens = gh * gw // (merge * merge)
    ids = [10 + i % 200 for i in range(seq)]
    pos = 1
    for _ in range(count):
        for j in range(tokens):
            ids[pos + j] = raw["image_token_id"]
        pos += tokens + 2
    assert pos <= seq, "seq too short for the images"
    pixels = torch.randn(count * gh * gw, 3, patch, patch)
    return torch.tensor([ids]), {"pixel_values": pixels, "image_grid_thw": torch.tensor([[1, gh, gw]] * count)}


def gemma4_inputs(raw, count, height, width, seq):
    """input_ids with count images of height x width as tools/oracle/gemma4vl.py lays them out (Gemma4ImageProcessor's
    resize, padded patches and positions), the pixel values and image_position_ids."""
    import gemma4vl_inputs
    ids, extra, _ = gemma4vl_inputs.inputs(raw, count, height, width, seq)
    return ids, extra


def gemma3_inputs(raw, count, seq):
    """input_ids with count images as tools/oracle/gemma3vl.py lays them out (boi, mm_tokens_per_image image
    tokens, eoi; token_type_ids 1 on the image tokens), the images resized to image_size (Gemma3ImageProcessor)."""
    tokens, side = raw["mm_tokens_per_image"], raw["vision_config"]["image_size"]
    ids = [10 + i % 150 for i in range(seq)]
    types = [0] * seq
    pos = 1
    for _ in range(count):
        ids[pos] = raw["boi_token_index"]
        for j in range(tokens):
            ids[pos + 1 + j] = raw["image_token_index"]
            types[pos + 1 + j] = 1
        ids[pos + 1 + tokens] = raw["eoi_token_index"]
        pos += tokens + 2
    assert pos <= seq, "seq too short for the images"
    return torch.tensor([ids]), {"pixel_values": torch.rand(count, 3, side, side), "token_type_ids": torch.tensor([types])}


def vision_inputs(raw, count, height, width, seq, proc):
    """input_ids with count images of height x width (each its vision_start, image tokens, vision_end, as
    tools/oracle/qwen25vl.py lays them out), the pixel patches and image_grid_thw; proc is the case's image
    processor options (LFM2-VL's)."""
    if raw["model_type"] == "llama4":
        return llama4_inputs(raw, count, height, width, seq)
    if raw["model_type"] == "kimi_k25":
        return kimi_inputs(raw, count, height, width, seq)
    if raw["model_type"] == "gemma4":
        return gemma4_inputs(raw, count, height, width, seq)
    if raw["model_type"] == "gemma3":
        return gemma3_inputs(raw, count, seq)
    if raw["model_type"] == "qwen2_vl":  # 5.25.0 wants mm_token_type_ids with the images
        from qwenvl_inputs import image_inputs
        ids, types, pixels, grid, _ = image_inputs(raw, count, height, width, seq)
        return ids, {"pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": types}
    if raw["model_type"] in ("idefics3", "smolvlm"):
        import idefics3_inputs
        ids, pixels, mask, _ = idefics3_inputs.inputs(raw, count, height, width, seq)
        return ids, {"pixel_values": pixels, "pixel_attention_mask": mask}
    if raw["model_type"] == "lfm2_vl":
        import lfm2vl_inputs
        ids, pixels, mask, spatial, _ = lfm2vl_inputs.inputs(raw, count, height, width, seq, proc)
        return ids, {"pixel_values": pixels, "pixel_attention_mask": mask, "spatial_shapes": spatial}
    if raw["model_type"] in ("llava_next", "llava_onevision"):
        import llava_next_inputs
        cfg = transformers.AutoConfig.for_model(**raw)
        ids, extra, _, _ = llava_next_inputs.inputs(cfg, count, height, width, seq)
        return ids, extra
    if raw["model_type"] == "mistral3":
        import mistral3vl_inputs
        ids, extra, _ = mistral3vl_inputs.inputs(raw, count, height, width, seq)
        return ids, extra
    vc = raw["vision_config"]
    patch, merge, temporal = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
    factor = patch * merge
    gh, gw = max(round(height / factor), 1) * merge, max(round(width / factor), 1) * merge
    tokens = gh * gw // (merge * merge)
    ids = [10 + i % 200 for i in range(seq)]
    pos = 1
    for _ in range(count):
        ids[pos] = raw["vision_start_token_id"]
        for j in range(tokens):
            ids[pos + 1 + j] = raw["image_token_id"]
        ids[pos + 1 + tokens] = raw["vision_end_token_id"]
        pos += tokens + 3
    assert pos <= seq, "seq too short for the images"
    pixels = torch.randn(count * gh * gw, 3 * temporal * patch * patch)
    return torch.tensor([ids]), {"pixel_values": pixels, "image_grid_thw": torch.tensor([[1, gh, gw]] * count)}


def measure(case, batch, seq):
    raw, model = build(case)
    batch, seq = case[3].get("batch", batch), case[3].get("seq", seq)
    extra = {}
    if "images" in case[3]:
        ids, extra = vision_inputs(raw, *case[3]["images"], seq, case[3].get("processor", {}))
    else:
        ids = torch.randint(0, raw["vocab_size"] - 8, (batch, seq))
    labels = ids
    if case[3].get("labels") == "sequence":  # a classification head: one class a sample (num_labels 2)
        labels = torch.randint(0, 2, (ids.shape[0],))
    elif case[3].get("labels") == "token":  # one class a token
        labels = torch.randint(0, 2, ids.shape)
    where = Where(model)
    counter = Counter(where)
    try:
        with counter, Tag(where):
            loss = model(input_ids=ids, labels=labels, **extra).loss
            propagate(loss.grad_fn)
            where.phase = "backward"
            loss.backward()
    finally:
        where.close()
    name, file, attn, opts = case
    return {
        "name": name, "config": file, "attn": attn, "options": opts, "batch": batch, "seq": seq,
        "total": counter.get_total_flops(),
        **{p: {m: dict(ops) for m, ops in sorted(rows.items())} for p, rows in counter.rows.items()},
        "uncounted": dict(counter.uncounted),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "command": "python tools/oracle/flops.py --out sim/testdata/flops_torch.jsonl",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="", help="comma-separated names (default: all)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    want = set(a.cases.split(",")) if a.cases else None
    with open(a.out, "w") as f:
        for case in CASES:
            if want and case[0] not in want:
                continue
            rec = measure(case, a.batch, a.seq)
            ours = sum(sum(ops.values()) for p in ("forward", "backward", "recompute") for ops in rec[p].values())
            if ours != rec["total"]:  # every FLOP FlopCounterMode counted is given to one module and phase
                sys.exit(f"{case[0]}: attributed {ours} FLOPs, FlopCounterMode's Global {rec['total']}")
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            print(case[0], rec["total"], "uncounted:", rec["uncounted"], file=sys.stderr)


if __name__ == "__main__":
    main()
