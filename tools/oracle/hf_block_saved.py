# hf_block_saved.py: what autograd keeps for backward in one training step
# of a transformers model built from a config.json (fp32 or bf16 weights,
# no autocast, on the CPU), for the Go tests that check memsh's lowering
# of a family against the release it names (sim/hfconfig_tf5b_test.go).
#
#   python hf_block_saved.py CONFIG.json LAYERS BATCH SEQ DTYPE ATTN [v] [nocache] [mask] [tokentypes] [ckpt] [held] [keepfp32] [eagerexperts] [qat=G|qat=int8-int4:G]
#   PYTHONPATH=DIR python hf_block_saved.py ...   # DIR: another release (pip install --target DIR --no-deps)
#
# The class is the config's architectures[0], built with
# num_hidden_layers = LAYERS and attn_implementation = ATTN ("eager",
# "sdpa"); one forward (labels = input_ids; an encoder's heads get labels
# of their own, see below) of BATCH samples of SEQ tokens, no padding. It prints the bytes of the distinct storages autograd packed
# (parameters excluded), "saved", and of those some autograd node still
# holds when backward starts, "kept" (what the step keeps; a tensor saved
# on a branch the loss does not reach dies with the forward). A block's
# bytes are the difference of two runs, LAYERS 2 and 1. With v, each
# storage: shape, dtype, bytes, grad_fn, kept. With nocache the forward
# passes use_cache=False, as training scripts set it and gradient
# checkpointing forces it (memsh: train(use_cache=False)): otherwise the
# config's use_cache (true by default) makes a DynamicCache whose
# torch.cat copies k and v in every layer, the tensors the kernel then
# reads (a fused qkv projection's v is no longer a view of its output).
# With tokentypes the forward gets token_type_ids, zeros [BATCH, SEQ] int64,
# as BERT's tokenizer hands them (model_input_names) and the Trainer
# passes them on; without, none (RoBERTa's tokenizers make none).
# With mask the forward gets an attention_mask of ones (no padding), as a
# data collator passes it; without, none. With ckpt every decoder layer
# is checkpointed (gradient_checkpointing_enable, use_reentrant=False):
# what the step keeps is then each layer's input, which the checkpoint
# saves before its own hooks take over. With held it prints, besides,
# "held": the bytes of the distinct storages handed to the decoder layers (the
# model's ModuleList named layers, encoder.layer or, MPT's, blocks, or
# GPT-J's transformer.h)
# (their arguments, keyword arguments included: the rotary cos and sin,
# the 4-D attention mask; the tensors in a mapping, Gemma 3n's and Gemma
# 4's shared_kv_states, a UserDict, included) that live after the forward
# and that autograd did not pack: what a checkpointed layer's partial holds until its
# backward, out of the pack hook's sight (weakrefs from a forward pre-hook).
# With keepfp32 the model is loaded in DTYPE by from_pretrained (saved
# by save_pretrained to a temporary directory first): the modules a class
# lists in _keep_in_fp32_modules_strict stay fp32 in bf16 and fp16 (ERNIE
# 4.5 MoE's and, from 5.24, DeepSeek's gate.weight), those in
# _keep_in_fp32_modules in fp16 only (DeepSeek-V3.2's
# indexer.weights_proj); without, cls(cfg).to(DTYPE) casts every parameter. The line of figures
# ends with the bytes of the parameters (tied ones once) and of their
# gradients after the backward. With eagerexperts transformers 5's MoE
# experts run its per-expert loop (experts_implementation "eager", the
# default being grouped_mm). layer_types, mlp_layer_types and Ling 3's
# swiglu_limits and swiglu_limits_shared are cut to LAYERS with the layers
# (Zamba2's hybrid_layer_ids made again from its cut layers_block_type;
# Laguna's num_attention_heads_per_layer cut too; a config whose layers
# differ by per_layer_config, Dots 3 Note's, made again from the file with
# num_hidden_layers and its lists cut).
import collections.abc
import gc
import json
import sys
import tempfile
import weakref

import torch

import transformers

torch.manual_seed(0)
torch.set_num_threads(1)
raw = json.load(open(sys.argv[1]))
layers, batch, seq = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dtype, attn = getattr(torch, sys.argv[5]), sys.argv[6]
cls = getattr(transformers, raw["architectures"][0])
cfg = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "architectures"})
if getattr(cfg, "is_heterogeneous", False):  # per_layer_config (Dots 3 Note's sliding layers) is keyed by layer index: made again from the file cut to LAYERS
    cut = {k: v[:layers] if k in ("layer_types", "mlp_layer_types") and isinstance(v, list) else v for k, v in raw.items() if k != "architectures"}
    cfg = transformers.AutoConfig.for_model(**dict(cut, num_hidden_layers=layers))
cfg.num_hidden_layers = layers
if getattr(cfg, "num_layers_per_stack", None) is not None:  # HrmTextConfig: LAYERS is each of its two stacks' (its num_hidden_layers, rewritten by __post_init__, counts the cache's slots)
    cfg.num_layers_per_stack = layers
    cfg.num_hidden_layers = layers * cfg.H_cycles * (cfg.L_cycles + 1)
for key in ("layer_types", "mlp_layer_types", "swiglu_limits", "swiglu_limits_shared", "num_attention_heads_per_layer", "layer_rope_theta", "kv_source_layers"):  # per-layer lists cut with the layers (from_pretrained validates their length; Ling 3's SwiGLU limits; Laguna's heads; Kolibri 1.1's K/V sources)
    if isinstance(getattr(cfg, key, None), list) and len(getattr(cfg, key)) > layers:
        setattr(cfg, key, getattr(cfg, key)[:layers])
for key in ("index_layers", "mlp_only_layers"):  # lists of layer indices (Kolibri 1.1's indexers and dense layers) kept below the cut
    if isinstance(getattr(cfg, key, None), list):
        setattr(cfg, key, [i for i in getattr(cfg, key) if i < layers])
if isinstance(getattr(cfg, "hybrid_layer_ids", None), list):  # Zamba2Config.__post_init__'s list of the "hybrid" layers, made again for the cut layer_types
    cfg.hybrid_layer_ids = [i for i, t in enumerate(cfg.layers_block_type) if t == "hybrid"]
cfg._attn_implementation = attn
experts = {"experts_implementation": "eager"} if "eagerexperts" in sys.argv[7:] else {}
if experts:
    cfg._experts_implementation = "eager"
if "keepfp32" in sys.argv[7:]:
    with tempfile.TemporaryDirectory() as d:
        cls(cfg).save_pretrained(d)
        model = cls.from_pretrained(d, dtype=dtype, attn_implementation=attn, **experts).train()
else:
    model = cls(cfg).to(dtype).train()
# With lora=TARGETS (all-linear, or module names joined by commas) PEFT's
# get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=...))
# wraps the model first (its default autocast_adapter_dtype: fp32 adapters
# over a bf16 model); the figures are the wrapped model's. peft_moe_targets.py
# lists what it adapts.
lora = [a.removeprefix("lora=") for a in sys.argv[7:] if a.startswith("lora=")]
if lora:
    import peft
    targets = lora[0] if lora[0] == "all-linear" else lora[0].split(",")
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets))
# With qat=G torchao's Int8DynActInt4WeightQATQuantizer(groupsize=G,
# precision=DTYPE).prepare(model) swaps every nn.Linear whose in_features G
# divides (lm_head included) for an Int8DynActInt4WeightQATLinear, as
# torchtune's QAT recipes do (after LoRA's wrapping, when both are given).
# torchao is not in the venv: PYTHONPATH at its wheel unpacked
# (pip download torchao==0.18.0 --no-deps; unzip).
# qat=int8-int4:G swaps them as Axolotl's qat: block with activation_dtype
# int8 and weight_dtype int4 does (quantize_ with torchao's QATConfig:
# IntxFakeQuantizeConfig int8 per-token activations,
# Int4WeightFakeQuantizeConfig(G, activation_dtype=bf16) weights).
qat = [a.removeprefix("qat=") for a in sys.argv[7:] if a.startswith("qat=")]
if qat and qat[0].startswith("int8-int4:"):
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig
    from torchao.quantization.qat.fake_quantize_config import Int4WeightFakeQuantizeConfig, IntxFakeQuantizeConfig
    quantize_(model, QATConfig(activation_config=IntxFakeQuantizeConfig(dtype=torch.int8, granularity="per_token", is_symmetric=False),
                               weight_config=Int4WeightFakeQuantizeConfig(group_size=int(qat[0].split(":")[1]), activation_dtype=torch.bfloat16)))
elif qat:
    from torchao.quantization.qat import Int8DynActInt4WeightQATQuantizer
    model = Int8DynActInt4WeightQATQuantizer(groupsize=int(qat[0]), precision=dtype).prepare(model)
if "ckpt" in sys.argv[7:]:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
# Apertus 1.5's pruned head (output_vocab_size) takes labels below its
# width only (ForCausalLMLoss's cross-entropy refuses larger targets); the
# ids' values move no byte.
ids = torch.randint(1, raw.get("output_vocab_size") or raw["vocab_size"], (batch, seq))
# The labels: input_ids for a causal LM (its loss shifts a copy); for an
# encoder's heads the data collator's own tensor: a copy of the ids for a
# masked LM, a class a token for token classification, a class a sample
# for sequence classification (a float a sample with one label: MSE).
labels = ids
nlabels = cfg.num_labels
if cls.__name__.endswith("ForMaskedLM"):
    labels = ids.clone()
elif cls.__name__.endswith("ForTokenClassification"):
    labels = torch.randint(0, nlabels, (batch, seq))
elif cls.__name__.endswith("ForSequenceClassification"):
    labels = torch.rand(batch) if nlabels == 1 else torch.randint(0, nlabels, (batch,))
params = {p.data_ptr() for p in model.parameters()}
saved, alive, hold = {}, {}, []


class Box:
    def __init__(self, t):
        self.t = t


def pack(t):
    key = t.untyped_storage().data_ptr()
    if t.data_ptr() not in params and key not in saved:
        saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
    # A detached alias in the box: packing t itself would tie a saved
    # output to its own grad_fn in a cycle no collector frees. hold keeps
    # each storage allocated, so that no later one takes its address.
    box = Box(t.detach())
    hold.append(t.untyped_storage())
    alive.setdefault(key, []).append(weakref.ref(box))
    return box


args_seen = {}


def tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for y in x:
            yield from tensors(y)
    elif isinstance(x, collections.abc.Mapping):  # a dict, or Gemma 3n's KVSharingDict (a UserDict)
        for y in x.values():
            yield from tensors(y)


def note_args(module, args, kwargs):
    for t in tensors((args, kwargs)):
        if t.data_ptr() not in params:
            args_seen.setdefault(t.untyped_storage().data_ptr(), (t.untyped_storage().nbytes(), [], (tuple(t.shape), str(t.dtype))))[1].append(weakref.ref(t))


if "held" in sys.argv[7:]:
    decoder = [m for n, m in model.named_modules() if n.endswith(("layers", "encoder.layer", "blocks", "transformer.h")) and isinstance(m, torch.nn.ModuleList)][0]  # BERT's: encoder.layer; MPT's: blocks; GPT-J's: transformer.h
    for layer in decoder:
        layer.register_forward_pre_hook(note_args, with_kwargs=True)
with torch.autograd.graph.saved_tensors_hooks(pack, lambda box: box.t):
    mask = torch.ones_like(ids) if "mask" in sys.argv[7:] else None
    extra = {"token_type_ids": torch.zeros_like(ids)} if "tokentypes" in sys.argv[7:] else {}
    if "nocache" in sys.argv[7:]:  # 4.x's encoders take no use_cache
        extra["use_cache"] = False
    out = model(input_ids=ids, labels=labels, attention_mask=mask, **extra)
gc.collect()
live = {k for k in saved if any(r() is not None for r in alive[k])}
held = {k: (n, what) for k, (n, refs, what) in args_seen.items() if k not in saved and any(r() is not None for r in refs)}
out.loss.backward()
print("transformers", transformers.__version__, "torch", torch.__version__, "class", cls.__name__, "attn", model.config._attn_implementation)
print("layers", layers, "batch", batch, "seq", seq, "dtype", sys.argv[5], "saved", sum(v[2] for v in saved.values()),
      "kept", sum(v[2] for k, v in saved.items() if k in live),
      "param_bytes", sum(p.numel() * p.element_size() for p in model.parameters()),
      "grad_bytes", sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None))
if "held" in sys.argv[7:]:
    print("held", sum(n for n, _ in held.values()), *sorted(f"{what[0]}:{what[1]}:{n}" for n, what in held.values()))
if "v" in sys.argv[7:]:
    for k, v in saved.items():
        print(v, k in live)
