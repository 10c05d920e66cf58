# qat_linear.py: one torchao Int8DynActInt4WeightQATLinear's forward on
# the CPU (torch 2.15.0, torchao 0.18.0): the peak of the storages its
# forward makes (live_storage.Live: neither its input's nor its
# weight's) and what autograd saves for its backward (saved_tensors_hooks,
# the weight excluded), for sim/qat_test.go.
#
#   PYTHONPATH=<torchao 0.18.0 wheel unpacked> python tools/oracle/qat_linear.py IN OUT TOKENS GROUP DTYPE [frozen] [int8-int4]
#
# The input [TOKENS, IN] requires grad; with frozen the weight does not
# (torchtune's QATLoRALinear base: fake-quantized without autograd). With
# int8-int4 the linear is swapped as Axolotl's qat: block with
# activation_dtype int8 and weight_dtype int4 swaps it
# (axolotl/utils/quantization.py, _make_qat_config): quantize_(model,
# QATConfig(activation_config=IntxFakeQuantizeConfig(int8, "per_token",
# is_symmetric=False), weight_config=Int4WeightFakeQuantizeConfig(GROUP,
# activation_dtype=bf16))).
import sys

import torch

from live_storage import Live
from torchao.quantization.qat import Int8DynActInt4WeightQATQuantizer

torch.manual_seed(0)
torch.set_num_threads(1)
k, n, t, g = (int(a) for a in sys.argv[1:5])
dtype = getattr(torch, sys.argv[5])
model = torch.nn.Sequential(torch.nn.Linear(k, n, bias=False)).to(dtype)
if "int8-int4" in sys.argv[6:]:
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig
    from torchao.quantization.qat.fake_quantize_config import Int4WeightFakeQuantizeConfig, IntxFakeQuantizeConfig
    quantize_(model, QATConfig(activation_config=IntxFakeQuantizeConfig(dtype=torch.int8, granularity="per_token", is_symmetric=False),
                               weight_config=Int4WeightFakeQuantizeConfig(group_size=g, activation_dtype=torch.bfloat16)))
else:
    model = Int8DynActInt4WeightQATQuantizer(groupsize=g, precision=dtype).prepare(model)
if "frozen" in sys.argv[6:]:
    model[0].weight.requires_grad_(False)
x = torch.randn(t, k, dtype=dtype, requires_grad=True)
params = {p.untyped_storage().data_ptr() for p in model.parameters()}
saved = {}


def pack(s):
    key = s.untyped_storage().data_ptr()
    if key not in params:
        saved[key] = s.untyped_storage().nbytes()
    return s


live = Live(params, {x.untyped_storage().data_ptr()})
with torch.autograd.graph.saved_tensors_hooks(pack, lambda s: s), live:
    y = model(x)
print("torch", torch.__version__, "in", k, "out", n, "tokens", t, "group", g, "dtype", sys.argv[5], "frozen" if "frozen" in sys.argv[6:] else "trainable", "int8-int4" if "int8-int4" in sys.argv[6:] else "8da4w",
      "forward_peak", live.peak, "after_forward", live.live, "saved", sum(saved.values()))
