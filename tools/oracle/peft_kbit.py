# peft_kbit.py: what PEFT's prepare_model_for_kbit_training and get_peft_model leave
# on a small Llama (sim/kbit_test.go): parameters by dtype and trainability,
# whether torch.utils.checkpoint fell back to use_reentrant=True, the
# gradients' dtype. Measured with peft 0.21.2, transformers 5.24.0, torch 2.15
# on the CPU: /root/venv-oracle/bin/python tools/oracle/peft_kbit.py
#   params by dtype, trainable: {(float32, False): 38308352, (float32, True): 53248}
#   reentrant warning: True; gradient_checkpointing: True; params with grads: 53248 {float32}
import torch, warnings, collections
torch.set_num_threads(1)
from transformers import LlamaConfig, LlamaForCausalLM
from peft import prepare_model_for_kbit_training, get_peft_model, LoraConfig
cfg = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, vocab_size=32000, tie_word_embeddings=False)
m = LlamaForCausalLM(cfg).to(torch.bfloat16)
m.is_loaded_in_4bit = True  # take PEFT's k-bit branch (enable_input_require_grads, checkpointing); bitsandbytes cannot run here
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    m = prepare_model_for_kbit_training(m)
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
    c = collections.Counter()
    for n, p in m.named_parameters():
        c[(str(p.dtype), p.requires_grad)] += p.numel()
    print("params by dtype, trainable:", dict(c))
    ids = torch.randint(0, 32000, (2, 64))
    m.train()
    out = m(input_ids=ids, labels=ids)
    out.loss.backward()
    print("reentrant warning:", any("use_reentrant" in str(x.message) for x in w))
    print("gradient_checkpointing:", m.base_model.model.model.gradient_checkpointing)
    g = sum(p.grad.numel() for p in m.parameters() if p.grad is not None)
    print("params with grads:", g, {str(p.grad.dtype) for p in m.parameters() if p.grad is not None})
