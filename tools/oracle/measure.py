"""Measures one configuration in PyTorch on the CPU: what autograd saves, and the model states.

The method is shared/oracle/measure.py's (REPORT.md section 2), reduced to the figures a vector keeps:
  * saved tensors: every tensor packed during the forward, seen by torch.autograd.graph.saved_tensors_hooks,
    deduplicated by storage and counted at the storage's full size if still saved when the forward ends;
    classed as param, buffer, param_cast (an autocast copy of a parameter) or activation. The caller's inputs (token ids, targets) are
    activations too, marked as inputs.
  * params (count of the model's own parameters, LoRA adapters not included, as memsh's model.params;
    unique storages: a tied weight once), trainable params (adapters included), parameter bytes (all), gradient bytes after
    backward, AdamW state bytes (exp_avg and exp_avg_sq; the 0-dim fp32 'step' tensors are listed apart:
    they live on the host even for CUDA parameters).
Two steps run (AdamW's state exists from step 2 on); step 2 is recorded, as memsh replays the steady state.
"""
import gc
import weakref

import torch

from blocks import Model, RMSNorm

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "amp_bf16": torch.float32}


def sptr(t):
    return t.untyped_storage().data_ptr()


def snbytes(t):
    return t.untyped_storage().nbytes()


VIEW_NODES = {"TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0", "ExpandBackward0",
              "UnsafeViewBackward0", "AliasBackward0", "SliceBackward0", "SelectBackward0"}


def is_param_cast(t, param_ptrs):
    fn = t.grad_fn
    for _ in range(6):
        if fn is None:
            return False
        n = fn.name()
        if n.startswith("ToCopyBackward"):
            nxt = fn.next_functions[0][0]
            return nxt is not None and "AccumulateGrad" in nxt.name() and sptr(nxt.variable) in param_ptrs
        if n in VIEW_NODES:
            fn = fn.next_functions[0][0]
            continue
        return False
    return False


class Saved:
    """saved_tensors_hooks recorder keeping metadata only."""

    def __init__(self, model, inputs):
        self.params = {sptr(p) for p in model.parameters()}
        # frozen fp32 weights: autocast casts them anew at each use (its cache keeps only casts of leaves that
        # require grad), with no grad_fn to trace; such a saved copy is found by its value
        self.frozen = {}
        for p in model.parameters():
            if not p.requires_grad and p.dtype == torch.float32:
                self.frozen.setdefault(tuple(p.shape), []).append(p)
        self.frozen_params = {sptr(p) for p in model.parameters() if not p.requires_grad}
        self.buffers = {sptr(b) for b in model.buffers()}
        self.inputs = {sptr(t) for t in inputs}
        self.storages = {}
        self.ctx = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    def cls(self, t):
        p = sptr(t)
        if p in self.params:
            return "param"
        if p in self.buffers:
            return "buffer"
        if is_param_cast(t, self.params):
            return "param_cast"
        if t.dtype == torch.bfloat16 and t.grad_fn is None:
            shape = tuple(t.shape)
            for p in self.frozen.get(shape, []) + self.frozen.get(shape[::-1], []):
                w = p.detach().to(torch.bfloat16)
                # a linear saves W^T (a view of the cast): a square weight matches one orientation only
                for cand in (w, w.t()) if w.dim() == 2 else (w,):
                    if tuple(cand.shape) == shape and torch.equal(t, cand):
                        return "param_cast"
        return "activation"

    def pack(self, t):
        p = sptr(t)
        e = self.storages.get(p)
        if e is None or not e.alive():  # a new storage: the address may be a freed one's
            e = Storage(self.cls(t), snbytes(t), p in self.inputs, str(t.dtype).replace("torch.", ""))
            self.storages[p] = e
        e.refs.append(weakref.ref(t))
        return t

    def __enter__(self):
        self.ctx.__enter__()
        return self

    def __exit__(self, *a):
        self.ctx.__exit__(*a)

    def held(self):
        """The storages still saved (call at the end of the forward, after gc.collect())."""
        return [e for e in self.storages.values() if e.alive()]

    def summary(self):
        out = {k: 0 for k in ("activation", "param_cast", "param", "buffer", "input")}
        for e in self.held():
            out[e.cls] += e.nbytes
            if e.is_input:
                out["input"] += e.nbytes
        return out


class Storage:
    """One saved storage: its class, size, and weak references to the tensors packed from it. The pack hook returns
    the tensor itself, so autograd's SavedVariable holds it: the storage is saved while one of them is alive. A
    storage saved and then released during the forward (the inputs of a checkpoint region that records no graph)
    is not counted, and its address, which the allocator may hand to a later tensor, is not mistaken for it."""

    def __init__(self, cls, nbytes, is_input, dtype):
        self.cls, self.nbytes, self.is_input, self.dtype = cls, nbytes, is_input, dtype
        self.refs = []

    def alive(self):
        return any(r() is not None for r in self.refs)


def build(c, layers):
    torch.manual_seed(0)
    m = Model(c, layers)
    if c.get("lora"):
        for n, p in m.named_parameters():
            p.requires_grad_("lora_" in n)
    for f in c.get("freeze", []):  # memsh roles: embed (the embedding), norm (every norm's weight and bias)
        for mod in m.modules():
            if (f == "embed" and isinstance(mod, torch.nn.Embedding)) or \
                    (f == "norm" and isinstance(mod, (torch.nn.LayerNorm, RMSNorm))):
                for p in mod.parameters():
                    p.requires_grad_(False)
    m = m.to(DTYPES[c["dtype"]])
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, c["vocab"], (c["b"], c["s"]), generator=g)
    tg = torch.randint(0, c["vocab"], (c["b"], c["s"]), generator=g)
    return m, ids, tg


def unique_params(m):
    seen, out = set(), []
    for p in m.parameters():
        if sptr(p) not in seen:
            seen.add(sptr(p))
            out.append(p)
    return out


def measure(c, layers):
    """Figures of c with this many blocks: a dict of ints."""
    m, ids, tg = build(c, layers)
    m.train()
    params = unique_params(m)
    train = [p for p in params if p.requires_grad]
    opt = torch.optim.AdamW(train, lr=1e-4, foreach=False)
    auto = c["dtype"] == "amp_bf16"
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        gc.collect()
        rec = Saved(m, (ids, tg))
        with rec, torch.autocast("cpu", dtype=torch.bfloat16, enabled=auto):
            loss = m(ids, tg)
        gc.collect()
        saved = rec.summary()  # what the forward left saved for backward
        loss.backward()
        grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
        del loss
        opt.step()
    st = {"exp_avg": 0, "exp_avg_sq": 0, "step": 0}
    for s in opt.state.values():
        for k, v in s.items():
            st[k] = st.get(k, 0) + v.numel() * v.element_size()
    base = [p for n, p in m.named_parameters() if "lora_" not in n]
    return dict(params=sum(p.numel() for p in base), trainable=sum(p.numel() for p in train),
                param_bytes=sum(p.numel() * p.element_size() for p in params), grad_bytes=grads,
                optimizer_bytes=st["exp_avg"] + st["exp_avg_sq"], optimizer_step_bytes=st["step"],
                saved_activations=saved["activation"], saved_weight_copies=saved["param_cast"],
                saved_inputs=saved["input"], saved_params=saved["param"], saved_buffers=saved["buffer"])
