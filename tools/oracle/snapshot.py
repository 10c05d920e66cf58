"""Records one training step of a difftest configuration on the CPU as a PyTorch memory snapshot.

The CPU has no caching allocator to record (torch.cuda.memory._record_memory_history is CUDA's), so this
recorder stands in for it, in the pickle format torch.cuda.memory._dump_snapshot writes: a
TorchDispatchMode sees every aten op below autograd, forward, backward and optimizer alike, and records an
`alloc` for each new storage an op returns (its size in bytes: what the op asked for, before CUDA's
allocator would round it) and a `free_requested`/`free_completed` pair once the storage is gone (polled
through torch's StorageWeakRef before each op). Temporaries inside one CPU kernel are not seen.

Each event's frames are memsh's form (snapshot.Frames in Go): {name: the aten op, filename: the op path},
{name: the phase, filename: the module path}, {name: "oracle", filename: "memsh"}, with module paths in
memsh's names for the harness model (RENAME). The module of a forward op is the innermost module running;
of a backward op, the module whose forward created the autograd node that runs it (a TorchFunctionMode
labels each node as it is created, a node pre-hook reads the label). Ops in the model's own forward after
the head are the loss's. Ops that run in the backward with grad enabled are a checkpoint's recompute, in
the module running them (else the checkpoint's). AdamW runs foreach, its CUDA default.

As memsh replays the steady state, two steps run and the second is recorded: the storages alive when it
starts (parameters, AdamW state, the batch, buffers) open the trace as setup allocations, in their
module; the step's zero_grad(set_to_none=True) comes first, as in measure.py.

    ~/venv-oracle/bin/python snapshot.py --vector vectors/issue29.jsonl --id issue29 --layers 2 \\
        --out snapshots/issue29.pickle

torch 2.15.0 (PyPI wheel, CPU, one thread). The Go side is snapshot_test.go.
"""
import argparse
import gc
import json
import pickle
import re

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from measure import build, unique_params

# The harness's module names (blocks.py) in memsh's (what tools/oracle/script.go's model calls them).
RENAME = [
    (r"^blocks\.(\d+)", r"layers.\1"),
    (r"\.norm1$", ".norm"), (r"\.norm2$", ".norm_1"),
    (r"\.mlp\.gate$", ".mlp.gate_proj"), (r"\.mlp\.up$", ".mlp.up_proj"), (r"\.mlp\.down$", ".mlp.down_proj"),
    (r"^final_norm$", "norm"),
]


def memsh_path(path):
    for pat, rep in RENAME:
        path = re.sub(pat, rep, path)
    return path


def tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


class Recorder:
    def __init__(self, model):
        self.trace, self.live = [], {}
        self.phase, self.stack, self.node_module = "setup", [], "loss.backward"
        self.after_head = False
        self.labels = {}  # id(node) -> module path, for nodes kept alive by the graph
        self.nodes = []   # the labelled nodes, kept so their ids stay unique while the step runs
        self.paths = {m: memsh_path(n) for n, m in model.named_modules()}
        for m in model.modules():
            m.register_forward_pre_hook(self.enter)
            m.register_forward_hook(self.leave)

    # module and phase
    def current_phase(self):
        """The phase; in the backward, ops run with grad enabled are a checkpoint's recompute (the backward's
        own ops run with grad disabled)."""
        if self.phase == "backward" and torch.is_grad_enabled():
            return "recompute"
        return self.phase

    def module(self):
        if self.phase == "backward":  # a node's own ops; a recompute's outside any module: the checkpoint's
            if torch.is_grad_enabled() and self.stack:
                return self.stack[-1]
            return self.node_module
        if self.phase == "optimizer":
            return "optimizer.step"
        if self.stack and self.stack[-1] != "":
            return self.stack[-1]
        return "loss" if self.after_head else "model"

    def enter(self, mod, args):
        path = self.paths[mod]
        self.stack.append(path)

    def leave(self, mod, args, out):
        self.stack.pop()
        if self.phase == "forward" and self.paths[mod] == "lm_head":
            self.after_head = True

    def label(self, out):
        """Labels the autograd nodes a torch function just created with the module running it."""
        module = self.module()
        todo = [t.grad_fn for t in tensors(out) if t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in self.labels:
                continue
            self.labels[id(node)] = module
            self.nodes.append(node)
            node.register_prehook(lambda grads, m=module: self.set_node(m))
            todo.extend(n for n, _ in node.next_functions)

    def set_node(self, module):
        self.node_module = module

    # allocations
    def frames(self, op):
        module = self.module()
        return [{"name": op, "filename": module + "." + op, "line": 0},
                {"name": self.current_phase(), "filename": module, "line": 0},
                {"name": "oracle", "filename": "memsh", "line": 0}]

    def add(self, storage, frames):
        key = storage._cdata
        if key in self.live or storage.nbytes() == 0:
            return
        self.live[key] = (StorageWeakRef(storage), storage.data_ptr(), storage.nbytes(), frames)
        self.event("alloc", storage.data_ptr(), storage.nbytes(), frames)

    def collect(self):
        for key, (ref, addr, size, frames) in list(self.live.items()):
            if ref.expired():
                del self.live[key]
                self.event("free_requested", addr, size, frames)
                self.event("free_completed", addr, size, frames)

    def event(self, action, addr, size, frames):
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                           "time_us": len(self.trace), "frames": frames})

    def setup(self, name, module, t):
        self.add(t.untyped_storage(), [{"name": name, "filename": module, "line": 0},
                                       {"name": "setup", "filename": module, "line": 0},
                                       {"name": "oracle", "filename": "memsh", "line": 0}])

    def snapshot(self):
        return {"segments": [], "device_traces": [self.trace]}


class Allocations(TorchDispatchMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.rec.collect()
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        for t in tensors(out):
            self.rec.add(t.untyped_storage(), self.rec.frames(name))
        return out


class Nodes(TorchFunctionMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if torch.is_grad_enabled():
            self.rec.label(out)
        return out


def record(c, layers):
    torch.set_num_threads(1)
    m, ids, tg = build(c, layers)
    m.train()
    params = unique_params(m)
    opt = torch.optim.AdamW([p for p in params if p.requires_grad], lr=1e-4, foreach=True)  # the CUDA default
    auto = c["dtype"] == "amp_bf16"

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=auto):
            loss = m(ids, tg)
        return loss

    opt.zero_grad(set_to_none=True)
    step().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    gc.collect()

    rec = Recorder(m)
    names = {}
    for n, p in m.named_parameters():
        names.setdefault(p.untyped_storage()._cdata, n)
    for key, n in names.items():
        p = m.get_parameter(n)
        mod = memsh_path(n.rsplit(".", 1)[0])
        rec.setup(memsh_path(n), mod, p)
        for k, v in opt.state.get(p, {}).items():
            if isinstance(v, torch.Tensor):
                rec.setup(memsh_path(n) + " " + k, mod, v)
    for n, b in m.named_buffers():
        rec.setup(memsh_path(n), memsh_path(n.rsplit(".", 1)[0]), b)
    rec.setup("input ids", "batch", ids)
    rec.setup("targets", "batch", tg)

    with Allocations(rec), Nodes(rec):
        rec.phase = "forward"
        loss = step()
        rec.phase = "backward"
        with torch.no_grad():  # the loss's gradient, made here so it is not taken for a recompute
            seed = torch.ones_like(loss)
        loss.backward(seed)
        del seed
        del loss
        rec.phase = "optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
        gc.collect()
        rec.collect()
    return rec.snapshot()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vector", help="a vectors/*.jsonl file")
    ap.add_argument("--id", help="the vector's id")
    ap.add_argument("--config", help="a JSON file holding one configuration (as a vector's config)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    elif a.vector and a.id:
        with open(a.vector) as f:
            vs = [json.loads(line) for line in f if line.strip()]
        v = next((v for v in vs if v["id"] == a.id), None)
        if v is None:
            raise SystemExit(f"no vector {a.id!r} in {a.vector}")
        config = v["config"]
    else:
        raise SystemExit("give --config FILE, or --vector FILE and --id ID")
    snap = record(config, a.layers)
    with open(a.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    allocs = sum(1 for e in snap["device_traces"][0] if e["action"] == "alloc")
    print(f"{a.out}: {allocs} allocations, torch {torch.__version__}")


if __name__ == "__main__":
    main()
