# flex_saved.py: what torch's compiled flex_attention saves for backward
# with a block_causal BlockMask (causal AND packed documents, as torchtitan
# builds it) and grouped-query attention, on the CPU, for
# sim/flex_attention_test.go.
#
#   /work/venv-t/bin/python flex_saved.py TOKENS bf16|fp32 MODE
#   MODE: aot_eager_decomp_partition (the min-cut partitioner Inductor
#         uses: the compiled step's saved set) or eager
#
# torch 2.15.0 runs flex_attention on the CPU but refuses its backward
# there (_validate_device, "FlexAttention does not support backward on
# CPU"); the check is patched out so that autograd's partition of the
# flex_attention higher-order op can be traced: the saved set is the
# autograd function's (torch/_higher_order_ops/flex_attention.py,
# FlexAttentionAutogradOp), device-independent. q, k, v are [tokens,
# heads, head_dim] handed over as torchtitan's FlexAttention does:
# x.transpose(0, 1).unsqueeze(0). 8 query heads, 2 kv heads, head_dim 64;
# three documents of tokens/2, tokens/4, tokens/4.
import sys

import torch
import torch.nn.attention.flex_attention as FA
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention

torch.manual_seed(0)
T, H, KV, D = int(sys.argv[1]), 8, 2, 64
dt = torch.bfloat16 if sys.argv[2] == "bf16" else torch.float32
mode = sys.argv[3]
positions = torch.cat([torch.arange(n) for n in (T // 2, T // 4, T // 4)])
doc = torch.cumsum((positions == 0).int(), 0).to(torch.int32) - 1


def causal(b, h, q, k):
    return q >= k


def document(b, h, q, k):
    return doc[q] == doc[k]


bm = create_block_mask(and_masks(causal, document), 1, None, T, T, device="cpu")
print("blockmask", [(n, tuple(getattr(bm, n).shape), getattr(bm, n).dtype) for n in
      ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
       "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")])
q = torch.randn(T, H, D, dtype=dt, requires_grad=True)
k = torch.randn(T, KV, D, dtype=dt, requires_grad=True)
v = torch.randn(T, KV, D, dtype=dt, requires_grad=True)
FA._validate_device = lambda *a: None
f = flex_attention if mode == "eager" else torch.compile(flex_attention, backend=mode)
saved = []


def pack(t):
    saved.append((tuple(t.shape), str(t.dtype).replace("torch.", ""), t.numel() * t.element_size(),
                  t.data_ptr() in (q.data_ptr(), k.data_ptr(), v.data_ptr())))
    return t


with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = f(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
            block_mask=bm, enable_gqa=True)
print("out", tuple(out.shape), out.stride(), out.dtype)
o = out.squeeze(0).transpose(0, 1)
print("out as [tokens, heads, head_dim] contiguous:", o.is_contiguous())
for s in saved:
    print("saved (shape, dtype, bytes, an input's storage)", s)
print("saved bytes, int32 mask tensors excluded:", sum(s[2] for s in saved if s[1] != "int32"))
o.sum().backward()
print("grads", tuple(q.grad.shape), tuple(k.grad.shape), tuple(v.grad.shape))
