"""FSDP1's reshard-only hook under reentrant checkpointing, on the CPU.

A LoRA Llama (transformers' LlamaForCausalLM with peft's LoRA on q, k, v, o)
trained one step with Hugging Face's gradient checkpointing
(use_reentrant=True, its default in transformers 4.x) and
enable_input_require_grads(), plain and under FSDP1 (world size 1, gloo)
wrapped by peft's fsdp_auto_wrap_policy (each adapter a unit of its own, the
decoder layers' FlatParameters frozen), as fms-hf-tuning's sft_trainer.py
wraps a PEFT model. A TorchDispatchMode counts the bytes of the storages
alive after each op (a weak reference per storage) and reports the peak and
the live storages there. Batches of 2 and 4 sequences of 512 tokens: their
difference over 1,024 tokens is the peak's bytes per token. With --no-hook
FSDP's _register_post_backward_reshard_only_hook is replaced by a no-op.

    pip install --target /tmp/hf445 --no-deps transformers==4.45.2 peft==0.13.2 \
        accelerate==1.0.1 "tokenizers>=0.20,<0.21" "huggingface_hub<1.0" requests \
        urllib3 idna charset_normalizer certifi
    PYTHONPATH=/tmp/hf445 ~/venv-oracle/bin/python fsdp1_reentrant.py [--no-hook]

torch 2.15.0 (CPU, one thread), transformers 4.45.2, peft 0.13.2, 8 layers:
plain 43,696 B/token, FSDP1 49,840 (seven layer-input gradients of 1,024 B a
token more at the peak, made by torch.utils.checkpoint's backward and kept),
FSDP1 with --no-hook 43,696. Its figures are in sim/fsdp1_reentrant_test.go.
"""
import collections
import functools
import os
import sys

import torch
import torch.distributed as dist
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

torch.set_num_threads(1)


class Live(TorchDispatchMode):
    """Bytes of the storages ops made that are still alive; the peak."""

    def __init__(self):
        super().__init__()
        self.live, self.cur, self.peak, self.at = {}, 0, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for k in [k for k, v in self.live.items() if v[0].expired()]:
            self.cur -= self.live.pop(k)[1]
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st.nbytes() and st.data_ptr() not in self.live:
                    self.live[st.data_ptr()] = (StorageWeakRef(st), st.nbytes(), str(func), tuple(t.shape))
                    self.cur += st.nbytes()
        if self.cur > self.peak:
            self.peak, self.at = self.cur, [v[1:] for v in self.live.values()]
        return out


def step(fsdp, batch, seq=512, layers=8):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=layers, num_attention_heads=8,
                      num_key_value_heads=8, vocab_size=1024, max_position_embeddings=4096)
    m = LlamaForCausalLM(cfg).to(torch.bfloat16)
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    m.enable_input_require_grads()
    m.config.use_cache = False
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=16, lora_dropout=0.1, task_type="CAUSAL_LM",
                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    for p in m.parameters():
        p.data = p.data.to(torch.bfloat16)
    if fsdp:
        from peft.utils.other import fsdp_auto_wrap_policy
        from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, ShardingStrategy
        m = FullyShardedDataParallel(m, auto_wrap_policy=fsdp_auto_wrap_policy(m), use_orig_params=True,
                                     sharding_strategy=ShardingStrategy.FULL_SHARD,
                                     backward_prefetch=BackwardPrefetch.BACKWARD_PRE, device_id=torch.device("cpu"))
    m.train()
    ids = torch.randint(0, 1024, (batch, seq))
    live = Live()
    with live:
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
    return live


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    if "--no-hook" in sys.argv:
        import torch.distributed.fsdp._runtime_utils as ru
        ru._register_post_backward_reshard_only_hook = lambda *a, **k: None
    for fsdp in (False, True):
        a, b = step(fsdp, 2), step(fsdp, 4)
        print("FSDP1" if fsdp else "plain", "peak", a.peak, b.peak, "bytes/token", (b.peak - a.peak) // 1024)
        big = collections.Counter((op, shape) for n, op, shape in b.at if n >= 1 << 20)
        for (op, shape), n in sorted(big.items()):
            print("   ", n, op, shape)


if __name__ == "__main__":
    main()
