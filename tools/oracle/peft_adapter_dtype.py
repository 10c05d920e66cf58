# peft_adapter_dtype.py: the dtype PEFT gives LoRA adapters over a bf16 model
# (get_peft_model's autocast_adapter_dtype, True by default since peft 0.12),
# what one adapted nn.Linear saves for backward, and its gradients' dtype
# (sim/core/lora.go, sim/kbit_test.go, docs/peft.md). Measured with peft
# 0.21.2, transformers 5.17, torch 2.15 on the CPU:
#   /work/venv-t/bin/python tools/oracle/peft_adapter_dtype.py
#   peft 0.21.2 autocast_adapter_dtype True {('torch.bfloat16', False): 1168128, ('torch.float32', True): 8192}
#     out torch.bfloat16 saved: [((256, 256), 'torch.bfloat16', False), ((256, 16), 'torch.float32', False),
#       ((16, 256), 'torch.float32', False), ((16, 256), 'torch.float32', False), ((16, 16), 'torch.float32', False)]
#     grads {'lora_A.default.weight': 'torch.float32', 'lora_B.default.weight': 'torch.float32'}
#   peft 0.21.2 autocast_adapter_dtype False {('torch.bfloat16', False): 1168128, ('torch.bfloat16', True): 8192}
#     out torch.bfloat16 saved: [((256, 256), 'torch.bfloat16', False), ((256, 16), 'torch.bfloat16', False),
#       ((16, 256), 'torch.bfloat16', True), ((16, 256), 'torch.bfloat16', False), ((16, 16), 'torch.bfloat16', False)]
#     grads {'lora_A.default.weight': 'torch.bfloat16', 'lora_B.default.weight': 'torch.bfloat16'}
# Saved: the frozen base weight, lora_A's weight and its input, lora_B's
# weight and its input (the [tokens, rank] lora_A output). The last field
# says whether a saved tensor is the layer's input x itself: with fp32
# adapters lora_A saves a new fp32 copy of x (x.to(lora_A.weight.dtype)),
# with bf16 adapters x itself. The layer's output is bf16 either way
# (result.to(torch_result_dtype)).
import torch, collections
torch.set_num_threads(1)
from transformers import LlamaConfig, LlamaForCausalLM
from peft import get_peft_model, LoraConfig
import peft
cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4, vocab_size=1000)
for autocast_adapter_dtype in (True, False):
    m = LlamaForCausalLM(cfg).to(torch.bfloat16)
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj"]), autocast_adapter_dtype=autocast_adapter_dtype)
    c = collections.Counter()
    for n, p in m.named_parameters():
        c[(str(p.dtype), p.requires_grad)] += p.numel()
    print("peft", peft.__version__, "autocast_adapter_dtype", autocast_adapter_dtype, dict(c))
    q = m.base_model.model.model.layers[0].self_attn.q_proj
    x = torch.randn(2, 8, 256, dtype=torch.bfloat16, requires_grad=True)
    saved = []
    def pack(t):
        saved.append((tuple(t.shape), str(t.dtype), t.data_ptr() == x.data_ptr()))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = q(x)
    print("  out", y.dtype, "saved:", saved)
    y.float().sum().backward()
    print("  grads", {n: str(p.grad.dtype) for n, p in q.named_parameters() if p.grad is not None})
