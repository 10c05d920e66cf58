"""Extra CUDA measurements for memsh's calibration (one H200 run), beside measure.py's --suite cuda.

    python3 extra.py SECTION --out FILE.jsonl [--deadline-s S]

SECTION is one of:
  context  device memory the process holds outside PyTorch's caching allocator: CUDA context, cuBLAS,
           SDPA and cuDNN, read with mem_get_info and memory_reserved after each first use (fresh process)
  kernels  bf16/fp32/fp8 GEMM TFLOP/s by shape, SDPA forward/backward TFLOP/s by sequence, elementwise
           bandwidth, AdamW step time per implementation (for-loop, foreach, fused)
  compile  peak allocated and step time of measure.py's llama stack, eager against torch.compile
Each record is one JSON line; a part that raises is written with "error" and the run goes on.
"""
import argparse
import gc
import json
import os
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
    print(line[:400], file=sys.stderr, flush=True)
    if OUT:
        with open(OUT, "a") as f:
            f.write(line + "\n")


def guarded(name, fn, *a, **kw):
    if DEADLINE is not None and time.time() - T0 > DEADLINE:
        emit(dict(part=name, skipped="deadline"))
        return None
    try:
        return fn(*a, **kw)
    except BaseException as e:  # an OOM or an API difference: record and go on
        emit(dict(part=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:]))
        torch.cuda.empty_cache()
        return None


def used():
    free, total = torch.cuda.mem_get_info()
    return dict(device_used=total - free, total=total, reserved=torch.cuda.memory_reserved(),
                allocated=torch.cuda.memory_allocated())


# ----------------------------------------------------------------------------- context

def context():
    env = {k: os.environ.get(k) for k in ("CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF",
                                          "CUBLAS_WORKSPACE_CONFIG", "CUDA_VISIBLE_DEVICES")}
    emit(dict(part="context_env", torch=torch.__version__, cuda=torch.version.cuda,
              cudnn=torch.backends.cudnn.version(), env=env))
    torch.cuda.init()
    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_init_and_one_tensor", **used()))
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    b = a @ a
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_bf16_matmul", **used()))
    a32 = a.float()
    b32 = a32 @ a32
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_fp32_matmul", **used()))
    lin = torch.nn.functional.linear(a, a, a[0])
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_addmm_lt", **used()))
    q = torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    o = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    o.sum().backward()
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_sdpa_fwd_bwd", **used()))
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, device="cuda", dtype=torch.bfloat16)
    y = conv(torch.randn(8, 64, 64, 64, device="cuda", dtype=torch.bfloat16))
    y.sum().backward()
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_cudnn_conv_fwd_bwd", **used()))
    g = torch.randn(4096, 4096, device="cuda", requires_grad=True)
    (g * 2).sum().backward()
    torch.cuda.synchronize()
    emit(dict(part="context", stage="after_first_autograd_thread_backward", **used()))
    del x, b, b32, lin, o, y, g
    torch.cuda.empty_cache()
    emit(dict(part="context", stage="after_empty_cache", **used()))


# ----------------------------------------------------------------------------- kernels

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


def gemm(m, n, k, dtype, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    r = timeit(lambda: a @ b)
    flops = 2 * m * n * k
    emit(dict(part="gemm", m=m, n=n, k=k, dtype=str(dtype).replace("torch.", ""), tf32=tf32,
              tflops=flops / r["median_s"] / 1e12, **r))
    torch.backends.cuda.matmul.allow_tf32 = False


def gemm_fp8(m, n, k):
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major second operand
    one = torch.tensor(1.0, device="cuda")
    r = timeit(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    emit(dict(part="gemm", m=m, n=n, k=k, dtype="float8_e4m3fn", tflops=2 * m * n * k / r["median_s"] / 1e12, **r))


def sdpa(b, h, s, d, backend=None):
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    F = torch.nn.functional
    ctx = None
    if backend is not None:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = lambda: sdpa_kernel([getattr(SDPBackend, backend)])
    else:
        import contextlib
        ctx = contextlib.nullcontext

    def fwd():
        with ctx():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    go = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)

    def fwdbwd():
        o = fwd()
        o.backward(go)

    rf = timeit(lambda: fwd(), warm=3, reps=10)
    rb = timeit(fwdbwd, warm=3, reps=10)
    with ctx():
        node = type(F.scaled_dot_product_attention(q, k, v, is_causal=True).grad_fn).__name__
    causal_flops = 4 * b * h * s * s * d / 2  # QK^T and PV, causal half
    emit(dict(part="sdpa", b=b, h=h, s=s, d=d, backend=backend or "default", node=node,
              fwd_s=rf["median_s"], fwd_bwd_s=rb["median_s"],
              fwd_tflops=causal_flops / rf["median_s"] / 1e12,
              fwd_bwd_tflops=3.5 * causal_flops / rb["median_s"] / 1e12,
              note="fwd_bwd_tflops counts 3.5x the causal forward FLOPs (backward 2.5x, FA2 convention)"))


def elementwise(n):
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    for name, fn, moved in (("copy", lambda: x.clone(), 4 * n),
                            ("add", lambda: x + y, 6 * n),
                            ("gelu", lambda: torch.nn.functional.gelu(x), 4 * n),
                            ("silu_mul", lambda: torch.nn.functional.silu(x) * y, 10 * n)):
        r = timeit(fn)
        emit(dict(part="elementwise", op=name, elements=n, dtype="bfloat16", bytes_moved=moved,
                  gbps=moved / r["median_s"] / 1e9, **r))
    h = 4096
    z = torch.randn(n // h, h, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(h, device="cuda", dtype=torch.bfloat16)
    r = timeit(lambda: torch.nn.functional.rms_norm(z, (h,), w))
    emit(dict(part="elementwise", op="rms_norm", elements=n, dtype="bfloat16", bytes_moved=4 * n,
              gbps=4 * n / r["median_s"] / 1e9, **r))
    r = timeit(lambda: torch.nn.functional.layer_norm(z, (h,), w, w))
    emit(dict(part="elementwise", op="layer_norm", elements=n, dtype="bfloat16", bytes_moved=4 * n,
              gbps=4 * n / r["median_s"] / 1e9, **r))


def adamw(shapes, impl):
    ps = [torch.randn(*s, device="cuda", requires_grad=True) for s in shapes]
    for p in ps:
        p.grad = torch.randn_like(p)
    kw = {"for-loop": dict(foreach=False), "foreach": dict(foreach=True), "fused": dict(fused=True)}[impl]
    opt = torch.optim.AdamW(ps, lr=1e-4, **kw)
    r = timeit(opt.step, warm=2, reps=5)
    n = sum(p.numel() for p in ps)
    emit(dict(part="adamw", impl=impl, tensors=len(ps), params=n, dtype="float32",
              bytes_touched_per_step=n * 4 * 7, gbps=n * 4 * 7 / r["median_s"] / 1e9, **r))
    del opt, ps
    torch.cuda.empty_cache()


def kernels():
    torch.backends.cuda.matmul.allow_tf32 = False
    for m, n, k in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                    (4096, 6144, 4096), (4096, 4096, 4096), (4096, 28672, 4096), (4096, 4096, 14336),
                    (4096, 14336, 4096), (16384, 14336, 4096), (16384, 4096, 14336), (8192, 128256, 4096),
                    (4096, 10240, 8192), (4096, 8192, 8192), (4096, 57344, 8192), (4096, 8192, 28672),
                    (512, 4096, 4096), (256, 14336, 4096), (2048, 1024, 1024), (8192, 2048, 2048),
                    (8192, 5632, 2048), (8192, 2048, 5632), (8192, 3072, 1024), (8192, 1024, 4096)):
        guarded("gemm", gemm, m, n, k, torch.bfloat16)
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192)):
        guarded("gemm", gemm, m, n, k, torch.float32)
        guarded("gemm", gemm, m, n, k, torch.float32, True)
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 14336, 4096), (16384, 4096, 14336)):
        guarded("gemm_fp8", gemm_fp8, m, n, k)
    for s in (1024, 2048, 4096, 8192, 16384):
        guarded("sdpa", sdpa, max(1, 16384 // s), 32, s, 128)
    for be in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
        guarded("sdpa", sdpa, 2, 32, 4096, 128, be)
    guarded("sdpa", sdpa, 4, 16, 1024, 64)
    guarded("elementwise", elementwise, 1 << 28)
    llama8b_4 = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096),
                 (14336, 4096), (14336, 4096), (4096, 14336), (4096,), (4096,)] * 4
    for impl in ("for-loop", "foreach", "fused"):
        guarded("adamw", adamw, llama8b_4, impl)
    small = [(2048, 2048), (256, 2048), (256, 2048), (2048, 2048), (5632, 2048), (5632, 2048), (2048, 5632),
             (2048,), (2048,)] * 22
    for impl in ("for-loop", "foreach", "fused"):
        guarded("adamw", adamw, small, impl)


# ----------------------------------------------------------------------------- compile

def compile_stack(cfg, mode):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import measure
    torch.manual_seed(0)
    dev = torch.device("cuda")
    m, inputs, gi = measure.build(cfg, dev)
    m = m.to(device=dev, dtype=measure.DTYPES[cfg["dtype"]])
    m.train()
    x = inputs[0].requires_grad_(True)
    opt = torch.optim.AdamW(list(m.parameters()), lr=1e-4)
    f = m if mode == "eager" else torch.compile(m)
    gout = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(x.dtype).to(dev)
    t_first = time.time()
    recs = []
    for step in range(1, 5):
        opt.zero_grad(set_to_none=True)
        x.grad = None
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        a0 = torch.cuda.memory_allocated()
        t0 = time.time()
        out = f(x)
        torch.cuda.synchronize()
        af = torch.cuda.memory_allocated()
        pf = torch.cuda.max_memory_allocated()
        out.backward(gout)
        del out
        torch.cuda.synchronize()
        pb = torch.cuda.max_memory_allocated()
        opt.step()
        torch.cuda.synchronize()
        recs.append(dict(step=step, wall_s=time.time() - t0, at_start=a0, after_forward=af,
                         peak_forward=pf, peak_through_backward=pb,
                         max_memory_allocated=torch.cuda.max_memory_allocated(),
                         max_memory_reserved=torch.cuda.max_memory_reserved()))
    emit(dict(part="compile", mode=mode, case=cfg, params=sum(p.numel() for p in m.parameters()),
              first_steps_wall_s=time.time() - t_first, steps=recs))
    del m, opt, f, x, inputs
    gc.collect()
    torch.cuda.empty_cache()


def compile_part():
    cfg = dict(kind="llama", layers=4, h=2048, a=32, kv=4, ffn=5632, s=2048, b=4, dtype="bf16", attn="sdpa",
               ckpt="none")
    for mode in ("eager", "inductor"):
        guarded("compile", compile_stack, cfg, mode)
    cfg2 = dict(kind="gpt2", layers=4, h=1024, a=16, s=1024, b=8, dtype="bf16", attn="sdpa", ckpt="none",
                drop="native")
    for mode in ("eager", "inductor"):
        guarded("compile", compile_stack, cfg2, mode)


def main():
    global OUT, DEADLINE
    ap = argparse.ArgumentParser()
    ap.add_argument("section", choices=["context", "kernels", "compile"])
    ap.add_argument("--out")
    ap.add_argument("--deadline-s", type=float)
    a = ap.parse_args()
    OUT, DEADLINE = a.out, a.deadline_s
    if not torch.cuda.is_available():
        print("extra.py: no CUDA device", file=sys.stderr)
        return 2
    emit(dict(part="start", section=a.section, device=torch.cuda.get_device_name(0), torch=torch.__version__))
    {"context": lambda: guarded("context", context), "kernels": kernels, "compile": compile_part}[a.section]()
    emit(dict(part="end", section=a.section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
