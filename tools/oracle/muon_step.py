"""Live tensors of torch.optim.Muon's step, measured on the CPU.

Run: /work/venv-t/bin/python tools/oracle/muon_step.py [reference_muon.py]  (torch 2.15)

For each case a Linear's weight of the given shape gets a gradient and
torch.optim.Muon (ns_steps, nesterov) steps it under a TorchDispatchMode
that records every storage an op makes and when it dies (a weak
reference to the storage); the peak is the largest sum of live storages
made inside the step, printed with the tensors alive at that moment.
sim/core/muon_test.go records the figures (TestMuonStepTemporariesAsTorch).
"""
import importlib.util
import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.multiprocessing.reductions import StorageWeakRef


class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live = {}  # storage key -> (bytes, name, shape, dtype)
        self.peak, self.at_peak = 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ins = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        out = func(*args, **kwargs)
        self.sweep()
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in ins and t.untyped_storage().nbytes() > 0:
                ref = StorageWeakRef(t.untyped_storage())
                self.live[id(ref)] = (ref, t.untyped_storage().nbytes(), func.__name__, list(t.shape), str(t.dtype))
        total = sum(v[1] for v in self.live.values())
        if total > self.peak:
            self.peak = total
            self.at_peak = sorted([(v[2], v[3], v[4], v[1]) for v in self.live.values()], key=lambda x: -x[3])
        return out

    def sweep(self):
        for k in [k for k, v in self.live.items() if v[0].expired()]:
            del self.live[k]


def case(rows, cols, dtype, nesterov, ns_steps, reference=None):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(rows, cols, dtype=dtype))
    w.grad = torch.randn(rows, cols, dtype=dtype)
    if reference is None:
        opt = torch.optim.Muon([w], nesterov=nesterov, ns_steps=ns_steps)
    else:
        opt = reference.Muon(muon_params=[w], nesterov=nesterov, ns_steps=ns_steps)
    opt.step()  # the momentum buffer exists from the first step on
    w.grad = torch.randn(rows, cols, dtype=dtype)
    m = Live()
    with m:
        opt.step()
    return {"impl": "torch" if reference is None else "reference", "rows": rows, "cols": cols, "dtype": str(dtype), "nesterov": nesterov, "ns_steps": ns_steps,
            "peak_bytes": m.peak, "at_peak": m.at_peak[:8],
            "state": {k: [list(v.shape), str(v.dtype)] for k, v in opt.state[w].items() if isinstance(v, torch.Tensor)}}


if __name__ == "__main__":
    print("torch", torch.__version__)
    cases = [(256, 1024, torch.float32, True, 5), (1024, 256, torch.float32, True, 5),
             (512, 512, torch.bfloat16, True, 5), (256, 1024, torch.float32, False, 5),
             (384, 640, torch.float32, True, 1)]
    for c in cases:
        print(json.dumps(case(*c)))
    # K. Jordan's reference Newton-Schulz (B = b*A + c*A@A; X = a*X + B@X) as
    # LLaMA-Factory copies it (src/llamafactory/third_party/muon/muon.py at
    # ff6d4d12e, its use_muon): pass that file's path.
    if len(sys.argv) > 1:
        spec = importlib.util.spec_from_file_location("reference_muon", sys.argv[1])
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        for c in cases + [(256, 1024, torch.bfloat16, True, 5), (256, 1024, torch.bfloat16, False, 5)]:
            print(json.dumps(case(*c, reference=ref)))
