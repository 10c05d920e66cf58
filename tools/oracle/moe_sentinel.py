# moe_sentinel.py: what transformers 5's MoE experts run and save in one
# training step of a tiny Qwen3-MoE (fp32, on the CPU), for
# sim/hfconfig_transformers5_sentinel_test.go: the aten ops each
# experts_implementation dispatches (masked_fill, one_hot and the one_hot's
# shape) and the bytes of the distinct storages autograd saves
# (parameters excluded).
#
# transformers 5.18.0 (integrations/moe.py) zeroes the expert-parallel
# sentinel rows of grouped_mm_experts_forward only when the experts are
# sharded (self._is_expert_parallel): 5.17.0 made the [S, 1] mask and ran
# one in-place and two out-of-place masked_fill over the routed rows on
# every rank. The eager loop's one_hot gained a class for the sentinels in
# the same release (num_classes=self.num_experts + 1).
#
#   python moe_sentinel.py                               # venv-t: 5.17.0
#   PYTHONPATH=DIR python moe_sentinel.py                # DIR: the 5.25.0 wheel unpacked
#                                                        # (with huggingface-hub>=2.4)
import collections
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import transformers
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

torch.manual_seed(0)
torch.set_num_threads(1)
T_BATCH, T_SEQ = 2, 64
cfg = dict(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
           num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[],
           max_position_embeddings=256, tie_word_embeddings=False)


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__
        self.ops[name] += 1
        return out


_one_hot = torch.nn.functional.one_hot
ONE_HOT = []


def one_hot(t, num_classes=-1):
    out = _one_hot(t, num_classes)
    ONE_HOT.append(tuple(out.shape))
    return out


torch.nn.functional.one_hot = one_hot


def step(experts):
    ONE_HOT.clear()
    c = Qwen3MoeConfig(**cfg)
    c._attn_implementation = "sdpa"
    model = Qwen3MoeForCausalLM(c)
    model.set_experts_implementation(experts)
    model.train()
    ids = torch.tensor([[(i * 7 + b) % 256 for i in range(T_SEQ)] for b in range(T_BATCH)])
    params = {p.data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        if t.data_ptr() not in params:
            saved.setdefault(t.untyped_storage().data_ptr(), (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes()))
        return t

    count = Count()
    with count:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    return count, sum(v[2] for v in saved.values()), saved


print("transformers", transformers.__version__, "torch", torch.__version__)
for experts in ("grouped_mm", "eager"):
    count, nbytes, saved = step(experts)
    mf = {k: v for k, v in count.ops.items() if k.startswith("masked_fill")}
    print(experts, "saved", nbytes, "masked_fill", dict(sorted(mf.items())), "one_hot", ONE_HOT)
    if "-v" in sys.argv:
        for v in saved.values():
            print("  ", v)
