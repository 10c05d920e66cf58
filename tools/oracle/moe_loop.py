# moe_loop.py: the storages autograd saves in transformers' per-expert MoE
# loop (MixtralSparseMoeBlock, transformers 4.48.1) on the CPU, for
# sim/moe_test.go's TestMoELoopSavesAsTransformers.
#
#   pip install --target /tmp/tf448 transformers==4.48.1
#   python moe_loop.py train    # every parameter trainable
#   python moe_loop.py frozen   # parameters frozen, the input requires grad
#
# It prints the bytes of the distinct storages saved for backward
# (parameters excluded), then each storage: shape, dtype, bytes, grad_fn.
import collections
import sys

import torch

sys.path.insert(0, "/tmp/tf448")
import transformers  # noqa: E402
from transformers import MixtralConfig  # noqa: E402
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
cfg = MixtralConfig(hidden_size=64, intermediate_size=128, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0)
block = MixtralSparseMoeBlock(cfg)
for p in block.parameters():
    p.requires_grad_(sys.argv[1] == "train")
params = {p.data_ptr() for p in block.parameters()}
x = torch.randn(1, 8, 64, requires_grad=True)

saved = collections.OrderedDict()


def pack(t):
    if t.data_ptr() not in params:
        key = t.untyped_storage().data_ptr()
        if key not in saved:
            saved[key] = (tuple(t.shape), str(t.dtype), t.untyped_storage().nbytes(), t.grad_fn.name() if t.grad_fn else None)
    return t


with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    block(x)
print("transformers", transformers.__version__, "torch", torch.__version__, "saved", sum(v[2] for v in saved.values()))
for v in saved.values():
    print(v)
