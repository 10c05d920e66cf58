"""Second H200 run for memsh's time model (prepared 2026-12-04; run as runs 4 and 6 of sim/testdata/cuda_h200): what run 1
(sim/testdata/cuda_h200) left open. One process, about 3 minutes, ~40 GB of device memory.

    cp -r ../shared/oracle .oracle && cp tools/oracle/cuda_profile.py .oracle/
    # device machine, carry [".oracle"]:
    timeout 420 python3 .oracle/cuda_profile.py --out $OUT/profile.jsonl --deadline-s 360

Parts (one JSON line per record, "part" names it; a part that raises is written with "error"):
  overhead  the harness's per-call time (s.record(); fn(); e.record()) of a 1-element add: run 1
            inferred 21.1 us from its smallest GEMMs (timing/h200_measured_test.go)
  clocks    nvidia-smi sampled every 20 ms in a side process (SM clock, power, temperature) while
            the parts below run; each record carries its wall-clock start and end (t0, t1) to match
  gemm      run 1's bf16 shapes in a shuffled order, then 8192^3 back to back for 3 s in 100 ms
            windows: whether the rows run 1 measured 10-18 % slow (after 40 ms of large GEMMs)
            followed the power limit (clock down) or their shapes
  eager     eager attention's elementwise ops at the suite's sizes ([8, 16, 1024, 1024] and
            [4, 32, 2048, 2048] bf16): scale, masked_fill over a broadcast bool mask, softmax
            (bf16 and fp32 out), native_dropout, and layer_norm / gelu(tanh) on [8192, 1024] and
            [8192, 4096]: the kernels memsh prices at one stream rate
  profile   torch.profiler of one plain step (as measure.py times it) of four suite cases, kernel
            time summed by kernel name, the step's wall time and the GPU's busy time: where memsh's
            -9..-35 % on the bf16 rows (sim/calib_cuda_time_test.go) goes
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time
import traceback

import torch

T0 = time.time()
OUT = None
DEADLINE = None


def emit(rec):
    rec["t_s"] = round(time.time() - T0, 3)
    line = json.dumps(rec, default=str)
    print(line[:300], file=sys.stderr, flush=True)
    if OUT:
        with open(OUT, "a") as f:
            f.write(line + "\n")


def guarded(name, fn, *a, **kw):
    if DEADLINE is not None and time.time() - T0 > DEADLINE:
        emit(dict(part=name, skipped="deadline"))
        return None
    try:
        return fn(*a, **kw)
    except BaseException as e:
        emit(dict(part=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-1500:]))
        torch.cuda.empty_cache()
        return None


def timeit(fn, warm=3, reps=10):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return dict(median_s=ts[len(ts) // 2], min_s=ts[0], max_s=ts[-1], reps=reps)


def back_to_back(fn, reps):
    """reps calls queued without a sync between them: the kernels' own time, no per-call gap."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / reps


def overhead():
    x = torch.ones(1, device="cuda")
    y = torch.ones(1, device="cuda")
    r = timeit(lambda: x + y, warm=10, reps=50)
    emit(dict(part="overhead", op="add 1 element", back_to_back_s=back_to_back(lambda: x + y, 200), **r))


def clocks_start(path):
    try:
        return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                                 "--format=csv,noheader", "-lms", "20"], stdout=open(path, "w"), stderr=subprocess.DEVNULL)
    except (OSError, ValueError) as e:
        emit(dict(part="clocks", error=str(e)))
        return None


def gemm_sweep():
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 28672, 4096), (4096, 4096, 14336), (16384, 14336, 4096),
              (16384, 4096, 14336), (8192, 128256, 4096), (4096, 10240, 8192), (4096, 8192, 8192), (4096, 57344, 8192),
              (4096, 8192, 28672), (256, 14336, 4096), (8192, 2048, 2048), (8192, 5632, 2048), (8192, 3072, 1024),
              (8192, 1024, 4096)]
    random.Random(1).shuffle(shapes)
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        time.sleep(0.5)  # idle: each shape starts cool
        t0 = time.time()
        r = timeit(lambda: a @ b)
        bb = back_to_back(lambda: a @ b, 20)
        emit(dict(part="gemm", m=m, n=n, k=k, t0=t0, t1=time.time(), tflops=2 * m * n * k / r["median_s"] / 1e12,
                  back_to_back_tflops=2 * m * n * k / bb / 1e12, **r))
        del a, b
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    time.sleep(1.0)
    windows = []
    t_end = time.time() + 3.0
    while time.time() < t_end:
        t0 = time.time()
        sec = back_to_back(lambda: a @ b, 60)
        windows.append(dict(t0=t0, tflops=2 * 8192 ** 3 / sec / 1e12))
    emit(dict(part="gemm_sustained", m=8192, n=8192, k=8192, windows=windows))


def eager_ops():
    F = torch.nn.functional
    for b, h, s in ((8, 16, 1024), (4, 32, 2048)):
        x = torch.randn(b, h, s, s, device="cuda", dtype=torch.bfloat16)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device="cuda"), 1)[None, None]
        n = x.numel()
        for name, fn, moved in (("mul_scalar", lambda: x * 0.125, 4 * n),
                                ("masked_fill_broadcast", lambda: x.masked_fill(mask, float("-inf")), 4 * n + s * s),
                                ("softmax_bf16", lambda: torch.softmax(x, -1), 4 * n),
                                ("softmax_fp32_out", lambda: torch.softmax(x, -1, dtype=torch.float32), 6 * n),
                                ("to_fp32", lambda: x.float(), 6 * n),
                                ("native_dropout", lambda: torch.native_dropout(x, 0.1, True), 5 * n)):
            t0 = time.time()
            r = timeit(fn)
            emit(dict(part="eager", op=name, shape=[b, h, s, s], bytes=moved, t0=t0, t1=time.time(),
                      gbps=moved / r["median_s"] / 1e9, back_to_back_s=back_to_back(fn, 10), **r))
        del x, mask
        torch.cuda.empty_cache()
    for rows, w in ((8192, 1024), (8192, 4096)):
        z = torch.randn(rows, w, device="cuda", dtype=torch.bfloat16)
        g = torch.ones(w, device="cuda", dtype=torch.bfloat16)
        for name, fn in (("layer_norm", lambda: F.layer_norm(z, (w,), g, g)),
                         ("gelu_tanh", lambda: F.gelu(z, approximate="tanh"))):
            r = timeit(fn)
            emit(dict(part="eager", op=name, shape=[rows, w], bytes=4 * z.numel(), gbps=4 * z.numel() / r["median_s"] / 1e9,
                      back_to_back_s=back_to_back(fn, 20), **r))


def profile_case(c):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import measure
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    dev = torch.device("cuda")
    m, inputs, gi = measure.build(c, dev)
    m = m.to(device=dev, dtype=measure.DTYPES[c["dtype"]])
    m.train()
    if gi is not None:
        inputs[gi].requires_grad_(True)
    opt = torch.optim.AdamW(list(m.parameters()), lr=1e-4)
    amp = c["dtype"] == "amp_bf16"

    def fwd():
        if amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m(*inputs)
        return m(*inputs)

    probe = fwd().detach()
    gout = torch.randn(probe.shape, generator=torch.Generator().manual_seed(1)).to(probe.dtype).to(dev)
    del probe

    def step():
        opt.zero_grad(set_to_none=True)
        for x in inputs:
            x.grad = None
        torch.cuda.synchronize()
        t0 = time.time()
        out = fwd()
        out.backward(gout)
        del out
        opt.step()
        torch.cuda.synchronize()
        return time.time() - t0

    walls = [step() for _ in range(3)]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall = step()
    by = collections.defaultdict(lambda: [0.0, 0])
    busy, first, last = 0.0, None, None
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            d = ev.time_range.elapsed_us()  # a kernel's (or memcpy's) own interval on the device
            by[ev.name][0] += d / 1e6
            by[ev.name][1] += 1
            busy += d / 1e6
    top = sorted(by.items(), key=lambda kv: -kv[1][0])[:40]
    emit(dict(part="profile", case=c, walls_s=walls, profiled_wall_s=wall, kernel_busy_s=busy,
              kernels=sum(v[1] for v in by.values()),
              top=[dict(name=k[:160], s=v[0], n=v[1]) for k, v in top]))
    del m, opt, inputs
    torch.cuda.empty_cache()


def main():
    global OUT, DEADLINE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--deadline-s", type=float)
    a = ap.parse_args()
    OUT, DEADLINE = a.out, a.deadline_s
    if not torch.cuda.is_available():
        print("cuda_profile.py: no CUDA device", file=sys.stderr)
        return 2
    emit(dict(part="start", device=torch.cuda.get_device_name(0), torch=torch.__version__, t_wall=time.time()))
    smi = clocks_start(os.path.join(os.path.dirname(OUT or "."), "clocks.csv"))
    guarded("overhead", overhead)
    guarded("gemm", gemm_sweep)
    guarded("eager", eager_ops)
    for c in (dict(kind="gpt2", layers=12, h=1024, a=16, s=1024, b=8, drop="native", dtype="bf16", attn="sdpa", ckpt="none"),
              dict(kind="gpt2", layers=12, h=1024, a=16, s=1024, b=8, drop="native", dtype="bf16", attn="eager", ckpt="none"),
              dict(kind="llama", layers=4, h=4096, a=32, kv=8, ffn=14336, s=4096, b=1, dtype="bf16", attn="sdpa", ckpt="none"),
              dict(kind="llama", layers=12, h=2048, a=32, kv=4, ffn=5632, s=2048, b=4, dtype="bf16", attn="eager",
                   ckpt="selective")):
        guarded("profile", profile_case, c)
    if smi is not None:
        smi.terminate()
    emit(dict(part="end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
