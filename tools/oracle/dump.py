#!/usr/bin/env python3
"""Lists the storages autograd saves for one configuration (a vector's config), with the backward nodes that
saved them: what to read when memsh and PyTorch differ.
    ~/venv-oracle/bin/python dump.py '{"h": 24, ...}' [depth]     or     dump.py vectors/x.jsonl ID [depth]
Non-reentrant checkpointing hides its saves from the graph walk (unpacking would recompute): use depth 1 and
read the totals."""
import gc
import json
import sys

import torch

import measure


def main():
    torch.set_num_threads(1)
    a = sys.argv[1:]
    if a[0].endswith(".jsonl"):
        v = next(json.loads(l) for l in open(a[0]) if json.loads(l)["id"] == a[1])
        c, a = v["config"], a[2:]
    else:
        c, a = json.loads(a[0]), a[1:]
    depth = int(a[0]) if a else 1
    m, ids, tg = measure.build(c, depth)
    rec = measure.Saved(m, (ids, tg))
    where = {}  # storage entry -> (dtype, shape, line) of its first packed tensor
    orig = rec.pack

    def pack(t):
        import traceback
        orig(t)
        e = rec.storages[measure.sptr(t)]
        if id(e) not in where:
            fr = [f for f in traceback.extract_stack()[:-1] if "blocks.py" in f.filename]
            where[id(e)] = (e, str(t.dtype), tuple(t.shape), f"{fr[-1].lineno}:{fr[-1].line}" if fr else "?")
        return t
    rec.pack = pack
    rec.ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with rec, torch.autocast("cpu", dtype=torch.bfloat16, enabled=c["dtype"] == "amp_bf16"):
        loss = m(ids, tg)
    gc.collect()
    tot = {}
    for e, dt, sh, line in sorted(where.values(), key=lambda r: (r[0].cls, r[3])):
        held = e.alive()
        if held:
            tot[e.cls] = tot.get(e.cls, 0) + e.nbytes
        print(f"{e.cls:11s} {e.nbytes:10d} {dt:15s} {str(sh):22s} {line}{'' if held else '  (released during the forward)'}")
    print(json.dumps(tot))
    del loss

if __name__ == "__main__":
    main()
