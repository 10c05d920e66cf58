"""Live tensors of Megatron-LM's Muon step, measured on the CPU.

Run: /work/venv-t/bin/python tools/oracle/muon_megatron_step.py EO_DIR  (torch 2.15)

EO_DIR is a checkout of NVIDIA-NeMo/Emerging-Optimizers (fd77292), whose
OrthogonalizedOptimizer.step and newton_schulz_tp Megatron-LM's
`--optimizer muon` runs (megatron/core/optimizer/emerging_optimizers.py
at d98e8a64dd, TensorParallelMuon). TensorParallelMuon itself imports
megatron.core; its orthogonalize (the QKV split, l.407-439) and its
scaled_orthogonalize_fn (newton_schulz_tp, then `orth_grad *
scale_factor * extra_scale_factor`, l.209-237) are restated below, one
statement each, and run on one-rank gloo groups (tp 1: Megatron's TE
weights carry partition_dim whatever the TP size, transformer_engine.py
l.122, so the "duplicated" all-gather and cat run at tp 1 too).

Each case steps an fp32 main parameter (Float16OptimizerWithFloat16Params'
copy) with an fp32 main gradient under a TorchDispatchMode that records
every storage an op makes and when it dies, as muon_step.py does, with
torch.set_float32_matmul_precision at Megatron's default "medium"
(--muon-fp32-matmul-prec). sim/core/muon_megatron_test.go records the
figures (TestMuonEmergingStepAsMeasured).
"""
import json
import os
import sys
import typing

import torch
import torch.distributed as dist

if not hasattr(typing, "override"):  # Python < 3.12: emerging_optimizers imports typing.override
    typing.override = lambda f: f

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from muon_step import Live  # noqa: E402


def tp_muon_class(eo):
    # The package's __init__ files import its registry, written in Python
    # 3.12's syntax; torch here runs on 3.11: the three modules are loaded
    # under empty packages.
    import types
    for name in ("emerging_optimizers", "emerging_optimizers.orthogonalized_optimizers"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(eo, *name.split("."))]
        sys.modules[name] = mod
    from emerging_optimizers.orthogonalized_optimizers.orthogonalized_optimizer import OrthogonalizedOptimizer
    # muon.py imports the registry: its get_muon_scale_factor("spectral"), a
    # float, is max(size_out, size_in) ** 0.5 (muon.py l.208-210).
    def get_muon_scale_factor(m, n, mode):
        return max(m, n) ** 0.5
    from emerging_optimizers.orthogonalized_optimizers.muon_utils import newton_schulz_tp

    class TPMuon(OrthogonalizedOptimizer):
        def __init__(self, params, nesterov, steps, qkv_split_shapes, partition_dim, tp_mode):
            def fn(grad, tp_group, partition_dim=None):
                size = [grad.size(-2), grad.size(-1)]
                orth = newton_schulz_tp(grad, steps=steps, coefficient_type="quintic", tp_group=tp_group,
                                        partition_dim=partition_dim, tp_mode=tp_mode)
                return orth * get_muon_scale_factor(size[0], size[1], mode="spectral") * 0.2

            self.split, self.partition_dim = qkv_split_shapes, partition_dim
            OrthogonalizedOptimizer.__init__(self, params, 1e-3, 0.9, nesterov=nesterov, weight_decay=0.01,
                                             weight_decay_method="decoupled", fp32_matmul_prec="medium",
                                             scaled_orthogonalize_fn=fn)

        def orthogonalize(self, p, grad, **kwargs):
            group = dist.group.WORLD
            if self.split:
                shape = grad.shape
                per = sum(self.split)
                groups = shape[0] // per
                parts = torch.split(grad.view(groups, per, -1), self.split, dim=1)
                parts = [g.reshape(-1, shape[-1]) for g in parts]
                parts = [self.scaled_orthogonalize_fn(g, group, self.partition_dim).view(groups, -1, shape[-1]) for g in parts]
                return torch.cat(parts, dim=1).view(shape)
            return self.scaled_orthogonalize_fn(grad, group, self.partition_dim)

    return TPMuon


def case(cls, rows, cols, nesterov, steps, split=None, partition_dim=0):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(rows, cols))
    w.grad = torch.randn(rows, cols)
    opt = cls([w], nesterov, steps, split, partition_dim, "duplicated")
    opt.step()  # the momentum buffer exists from the first step on
    w.grad = torch.randn(rows, cols)
    m = Live()
    with m:
        opt.step()
    return {"rows": rows, "cols": cols, "nesterov": nesterov, "ns_steps": steps, "qkv_split": split,
            "partition_dim": partition_dim, "peak_bytes": m.peak, "at_peak": m.at_peak[:10]}


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    cls = tp_muon_class(sys.argv[1])
    print("torch", torch.__version__)
    for c in [(256, 1024, False, 5), (1024, 256, False, 5), (512, 512, False, 5), (256, 1024, True, 5),
              (384, 640, False, 1), (256, 1024, False, 5, None, None)]:
        print(json.dumps(case(cls, *c)))
    # GQA's fused QKV, 2 query groups of (4 query heads + k + v) x 32: Q 256, K 32, V 32 rows a group.
    print(json.dumps(case(cls, 640, 512, False, 5, [256, 32, 32])))
    dist.destroy_process_group()
