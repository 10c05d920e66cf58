"""What DeepSpeed ZeRO allocates while it reduces gradients and steps, measured on the CPU, one rank of world.

    PYTHONPATH=/tmp/dspkg:/tmp/dsdeps DS_ACCELERATOR=cpu /work/venv-t/bin/python tools/oracle/zero_reduce.py
    (DeepSpeed 0.19.8, torch 2.15.0, CPU; about a minute)

One process stands for rank 0 of `world` ranks: the fake process group (torch.testing._internal.distributed.
fake_pg) runs no collective but hands back tensors of their real shapes, so DeepSpeed partitions, buckets and
flattens as rank 0 of that many ranks would. The model is a stack of Linear layers of chosen shapes (bias on the
last, its sizes not multiples of world: the padding), bf16, stage 2 or 3, reduce_bucket_size small enough that the
backward reduces several buckets, stage3_param_persistence_threshold 0, torch's AdamW (zero_allow_untested_optimizer).

A TorchDispatchMode records every storage an op makes during the backward and the step, with its bytes (the CPU
has no caching allocator: no 512-byte rounding), dtype, the op and the innermost DeepSpeed function on the Python
stack (the site); a weak reference says when it dies (the event count then, and the site). Printed per case: every
allocation of the reductions and the step at or above 64 bytes, in order, with its death; sim/zero_reduce_test.go
holds memsh's rules to these figures.

CPU-only paths (deepspeed/accelerator/cpu_accelerator.py): is_synchronized_device() is True, so no record_stream;
resolves_data_dependency() is True, so no stream waits; the reduce_and_partition_stream is the current stream.
None of these allocates on the GPU either (record_stream defers a free on the GPU: memsh frees at the same point).
"""
import json
import os
import sys
import weakref

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils._python_dispatch import TorchDispatchMode

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
os.environ.setdefault("RANK", "0")
os.environ.setdefault("LOCAL_RANK", "0")


def site():
    f = sys._getframe(2)
    while f is not None:
        if "deepspeed" in f.f_code.co_filename and "utils/nvtx" not in f.f_code.co_filename:
            return f.f_code.co_name
        f = f.f_back
    return "autograd"


class Trace(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0
        self.rows = []
        self.live = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ins = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        self.n += 1
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            s = t.untyped_storage()
            k = s.data_ptr()
            if k in ins or k in self.live or s.nbytes() == 0:
                continue
            row = {"at": self.n, "site": site(), "op": func.overloadpacket.__name__, "bytes": s.nbytes(),
                   "dtype": str(t.dtype).replace("torch.", ""), "numel": s.nbytes() // t.element_size(), "freed": None}
            self.rows.append(row)
            self.live[k] = row

            def free(k=k, row=row):
                row["freed"] = self.n
                row["freed_in"] = site()
                self.live.pop(k, None)

            weakref.finalize(s, free)
        return out


def case(stage, world, rank, shapes, bucket, accum=None, steps=2):
    import deepspeed
    torch.manual_seed(0)
    layers = [nn.Linear(i, o, bias=(j == len(shapes) - 1)) for j, (i, o) in enumerate(shapes)]
    model = nn.Sequential(*layers)
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
           "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage, "reduce_bucket_size": bucket, "stage3_param_persistence_threshold": 0}}
    if accum:
        cfg["data_types"] = {"grad_accum_dtype": accum}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    eng, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    x = torch.randn(2, shapes[0][0], dtype=torch.bfloat16)
    for _ in range(steps - 1):
        eng.backward(eng(x).float().pow(2).mean())
        eng.step()
    loss = eng(x).float().pow(2).mean()
    tr = Trace()
    with tr:
        eng.backward(loss)
        eng.step()
    rows = [r for r in tr.rows if r["bytes"] >= 64 or r["site"] == "reduce_scatter_coalesced"]
    return {"stage": stage, "world": world, "rank": rank, "shapes": shapes, "bucket": bucket, "accum": accum, "rows": rows}


# The cases: (stage, world, rank, shapes, reduce_bucket_size, grad_accum_dtype). Stage 2's rank is the one memsh
# follows (replay.zeroRank: the partition with the most gradient elements), stage 3's any (rank 0).
SHAPES = [[64, 96], [96, 128], [128, 50]]  # 6,144, 12,288, 6,400 and the bias 50 (not a multiple of 4)
CASES = [(3, 4, 0, SHAPES, 13000, None), (3, 4, 0, SHAPES, 13000, "fp32"), (2, 4, 2, SHAPES, 13000, None),
         # 8 ranks, a bias of 5 (three ranks of padding), a bucket smaller than the 12,288-element weight
         (3, 8, 0, [[64, 96], [96, 128], [128, 5]], 10000, None)]

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "case":
        c = json.loads(sys.argv[2])
        os.environ["WORLD_SIZE"], os.environ["RANK"] = str(c[1]), str(c[2])
        dist.init_process_group("fake", store=FakeStore(), rank=c[2], world_size=c[1])
        print(json.dumps(case(*c)))
        sys.exit(0)
    import subprocess
    import deepspeed
    print(json.dumps({"torch": torch.__version__, "deepspeed": deepspeed.__version__}))
    for c in CASES:
        out = subprocess.run([sys.executable, __file__, "case", json.dumps(c)], capture_output=True, text=True, check=True).stdout
        print([l for l in out.splitlines() if l.startswith('{"stage"')][0])
