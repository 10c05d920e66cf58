# peft_autocast_saved.py: what one PEFT-adapted nn.Linear (q_proj, rank 16)
# saves for backward under autocast with fp32 parameters (precision
# "bf16-mixed"), lora_dropout 0 and 0.1 (sim/core/lora.go loraAdapter,
# sim/lora_autocast_test.go, docs/peft.md). Autocast caches the casts of leaf
# tensors that require grad only (cached_cast, aten/src/ATen/autocast_mode.h):
# the frozen base weight and the layer's input, an activation, are cast anew.
# Each saved tensor is named by matching its values: W, A, B the base,
# lora_A and lora_B weights (^T transposed), x the layer input, "drop(x)" a
# [16, 256] bf16 tensor that is neither (the cast of dropout's output),
# "A(x)" lora_A's output. CPU autocast (bfloat16) caches as CUDA's does (the
# same cached_cast): checked here, two calls of a linear with a trainable
# weight save one bf16 weight copy, a frozen weight's and a non-leaf input's
# are cast anew on each call. CPU dropout saves an fp32 noise tensor where
# CUDA's native_dropout saves a bool mask. Measured with torch 2.15 (CPU),
# peft 0.21.2:
#   /work/venv-t/bin/python tools/oracle/peft_autocast_saved.py
#   lora_dropout 0.0 base weight trainable False out torch.bfloat16
#      [((256, 256), 'bfloat16', 'W^T'), ((256, 16), 'bfloat16', 'A^T'), ((16, 256), 'bfloat16', 'x'),
#       ((16, 256), 'bfloat16', 'B^T'), ((16, 16), 'bfloat16', 'A(x)')]
#      bf16 copies of x saved: 1 distinct storages: 1
#   lora_dropout 0.1 base weight trainable False out torch.bfloat16
#      [((256, 256), 'bfloat16', 'W^T'), ((2, 8, 256), 'float32', 'noise'), ((256, 16), 'bfloat16', 'A^T'),
#       ((16, 256), 'bfloat16', 'drop(x)'), ((16, 256), 'bfloat16', 'B^T'), ((16, 16), 'bfloat16', 'A(x)')]
#      bf16 copies of x saved: 0 distinct storages: 0
#   lora_dropout 0.0 base weight trainable True out torch.bfloat16
#      [((256, 256), 'bfloat16', 'W^T'), ((16, 256), 'bfloat16', 'x'), ((256, 16), 'bfloat16', 'A^T'),
#       ((16, 256), 'bfloat16', 'x'), ((16, 256), 'bfloat16', 'B^T'), ((16, 16), 'bfloat16', 'A(x)')]
#      bf16 copies of x saved: 2 distinct storages: 2
#   cache check: trainable weight 1 storage(s), frozen weight 2 storage(s), non-leaf input 2 storage(s)
# A frozen base weight's matmul saves no copy of x (mm saves its input only
# for the weight's gradient), so the one bf16 copy of x saved is lora_A's own
# cast; with a trainable base weight both copies are saved, two storages.
# With dropout, dropout runs on the fp32 x and lora_A saves the bf16 cast of
# its output.
import torch
torch.set_num_threads(1)
from transformers import LlamaConfig, LlamaForCausalLM
from peft import get_peft_model, LoraConfig
cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4, vocab_size=1000)
for dropout, train_base in ((0.0, False), (0.1, False), (0.0, True)):
    torch.manual_seed(0)
    m = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(r=16, lora_alpha=32, lora_dropout=dropout, target_modules=["q_proj"]))
    m.train()
    q = m.base_model.model.model.layers[0].self_attn.q_proj
    torch.nn.init.normal_(q.lora_B.default.weight)  # nonzero, to tell it apart
    q.base_layer.weight.requires_grad_(train_base)
    x0 = torch.randn(2, 8, 256, requires_grad=True)
    x = x0 * 1.0  # fp32, not a leaf, as the norm's output is (a leaf's cast would be cached)
    known = {"W": q.base_layer.weight, "A": q.lora_A.default.weight, "B": q.lora_B.default.weight, "x": x.reshape(16, 256)}
    saved = []
    def pack(t):
        name = "noise" if t.dim() == 3 else ("A(x)" if t.shape == (16, 16) else "drop(x)")
        for k, v in known.items():
            for vv, suf in ((v.detach(), ""), (v.detach().t(), "^T")):
                if vv.shape == t.shape and torch.allclose(vv.bfloat16().float(), t.detach().float(), atol=1e-2):
                    name = k + suf
        saved.append((tuple(t.shape), str(t.dtype).replace("torch.", ""), name, t.untyped_storage().data_ptr() % 10**6))
        return t
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = q(x)
    print("lora_dropout", dropout, "base weight trainable", train_base, "out", y.dtype)
    print("  ", [e[:3] for e in saved])
    xs = [e[3] for e in saved if e[2] == "x"]
    print("   bf16 copies of x saved:", len(xs), "distinct storages:", len(set(xs)))

# The caching rule itself: two calls each of a linear with a trainable weight,
# one with a frozen weight, on a non-leaf fp32 input.
lin = torch.nn.Linear(256, 64, bias=False)
frz = torch.nn.Linear(256, 64, bias=False).requires_grad_(False)
x = torch.randn(16, 256, requires_grad=True) * 1.0
ptrs = {"trainable weight": [], "frozen weight": [], "non-leaf input": []}
keep = []
def track(key, shape):
    def pack(t):
        if tuple(t.shape) == shape:
            ptrs[key].append(t.untyped_storage().data_ptr())
        return t
    return pack
with torch.autocast("cpu", dtype=torch.bfloat16):
    for key, mod, shape in (("trainable weight", lin, (256, 64)), ("frozen weight", frz, (256, 64)), ("non-leaf input", lin, (16, 256))):
        with torch.autograd.graph.saved_tensors_hooks(track(key, shape), lambda t: t):
            keep += [mod(x), mod(x)]
print("cache check:", ", ".join("%s %d storage(s)" % (k, len(set(v))) for k, v in ptrs.items()))
