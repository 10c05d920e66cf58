# live_storage.py: a TorchDispatchMode that follows the storages the ops
# run under it make, each until it is freed: the bytes alive and their
# peak (dsa_indexer.py, v4_indexer.py).
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Live(TorchDispatchMode):
    """Follows the storages ops make (not params' nor inputs'): live bytes and their peak."""

    def __init__(self, params, inputs):
        super().__init__()
        self.params = params  # the parameters' storages
        self.inputs = inputs  # storages made before (the call's arguments)
        self.live = 0
        self.peak = 0
        self.seen = {}
        self.at_peak = []
        self.func = None

    def _track(self, t):
        if not isinstance(t, torch.Tensor):
            return
        s = t.untyped_storage()
        key = s.data_ptr()
        if key in self.seen or key in self.params or key in self.inputs or s.nbytes() == 0:
            return
        n = s.nbytes()
        self.seen[key] = (n, tuple(t.shape), str(t.dtype).replace("torch.", ""), self.func)
        self.live += n
        if self.live > self.peak:
            self.peak = self.live
            self.at_peak = sorted(self.seen.values(), key=lambda v: -v[0])

        def free(k=key, n=n):
            self.live -= n
            self.seen.pop(k, None)

        weakref.finalize(s, free)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.func = str(func.overloadpacket.__name__)
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            self._track(t)
        return out
