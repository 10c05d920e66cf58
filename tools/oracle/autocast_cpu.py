# autocast_cpu.py: what autocast adds to the CPU side of an eager training
# step, for sim/calib_step_test.go's note on the BERT-large fp16 row.
#
#   ~/venv-oracle/bin/python autocast_cpu.py
#
# A stack of 24 BERT layers as transformers' BertLayer runs them (q, k, v
# projections, q k^T scaled and masked, softmax, dropout, p v, the output
# projection, dropout, residual and LayerNorm, the GELU MLP, dropout,
# residual and LayerNorm), made so small (hidden 16, 4 tokens) that the
# kernels' own work is negligible: the time of a forward and backward is the
# CPU's dispatch (Python, autograd, the dispatcher) per op. It is timed
# eagerly and under torch.autocast in bf16 and fp16 (the Autocast dispatch
# key, the casts it inserts), and the aten ops each step reaches are
# counted with a TorchDispatchMode. One thread; the three modes take turns,
# 9 rounds of 100 steps each, and each keeps its fastest round (the machine
# is shared: the fastest round is the one least disturbed). On this
# project's machine (2 shared cores, torch 2.15.0):
#
#   eager              15052 us a step, 4340 aten ops,  3.5 us an op
#   autocast bfloat16  18377 us a step, 5225 aten ops,  3.5 us an op; step 1.22x eager, ops 1.20x
#   autocast float16   15951 us a step, 5225 aten ops,  3.1 us an op; step 1.06x eager, ops 1.20x
#
# Autocast costs the CPU the ops it adds (its casts), not more per op.
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

torch.manual_seed(0)
torch.set_num_threads(1)
H, T, HEADS, LAYERS = 16, 4, 2, 24


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        lin = torch.nn.Linear
        self.q, self.k, self.v, self.o = lin(H, H), lin(H, H), lin(H, H), lin(H, H)
        self.fc1, self.fc2 = lin(H, 4 * H), lin(4 * H, H)
        self.ln1, self.ln2 = torch.nn.LayerNorm(H), torch.nn.LayerNorm(H)
        self.drop = torch.nn.Dropout(0.1)

    def heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, HEADS, H // HEADS).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / (H // HEADS) ** 0.5 + mask
        p = self.drop(torch.softmax(s, dim=-1))
        c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous().view(x.shape)
        x = self.ln1(x + self.drop(self.o(c)))
        return self.ln2(x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(x)))))


layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
x = torch.randn(1, T, H)
mask = torch.zeros(1, 1, 1, T)


def step(dtype):
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        h = x
        for layer in layers:
            h = layer(h, mask)
        loss = h.float().pow(2).mean()
    loss.backward()


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def ops(dtype):
    with Count() as c:
        step(dtype)
    return c.n


def timed(dtype, n):
    t = time.perf_counter()
    for _ in range(n):
        step(dtype)
    return (time.perf_counter() - t) / n


modes = {"eager": None, "autocast bfloat16": torch.bfloat16, "autocast float16": torch.float16}
for dt in modes.values():
    timed(dt, 20)  # warm up
best = {m: timed(dt, 100) for m, dt in modes.items()}
for _ in range(8):
    for m, dt in modes.items():
        best[m] = min(best[m], timed(dt, 100))
print("torch", torch.__version__)
base, ops0 = best["eager"], ops(None)
for m, dt in modes.items():
    n = ops(dt)
    print(f"{m:18s}{1e6 * best[m]:7.0f} us a step, {n} aten ops, {1e6 * best[m] / n:4.1f} us an op; "
          f"step {best[m] / base:.2f}x eager, ops {n / ops0:.2f}x")
