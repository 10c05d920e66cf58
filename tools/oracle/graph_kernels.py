"""Time PyTorch's eager kernels of PyG's message passing at the graph models' shapes.

memsh prices the gathers, scatter-adds and broadcast elementwise ops of anemoi's PyG
GraphTransformerConv from their access pattern at the copy bandwidth (sim/timing/graph.go);
anemoi-core PR #631's timing of the whole convolution says PyTorch's eager kernels run
slower than that (docs/time.md, "What it does not know"), and no public figure gives
their rates on Hopper. This script measures them, kernel by kernel, at Bris's shapes
(SEEDS.md story 1: 1,359,281 grid points, 261,634 hidden nodes, 1024 channels, 16 heads)
and at two of PR #631's (512 channels), so the rates can be recorded in sim/hw with this
script and its output as their source.

Each op is what PyG and autograd run (torch_geometric 2.x, torch 2.x):

  index_select   x.index_select(0, index): PyG's collect of x_i / x_j
  index_add      zeros(rows, C).index_add_(0, index, grad): index_select's backward
  scatter_add    zeros(rows, C).scatter_add_(0, index.view(-1, 1).expand(-1, C), msg):
                 torch_geometric.utils.scatter(reduce="sum")
  gather         grad.gather(0, index.view(-1, 1).expand(-1, C)): scatter_add_'s backward
  add            a + b, both [E, C]: the reference, contiguous operands
  mul_bcast      v.view(E, H, C // H) * alpha.view(E, H, 1): the message (alpha in the
                 same dtype, or fp32 under autocast: "mul_bcast_fp32")
  sum_heads      p.view(E, H, C // H).sum(-1): the attention scores

Destination indices are sorted (each destination's edges together, as anemoi's KNN and
multi-scale edge indices are built); source indices are uniform at random (a bound: real
graphs gather neighbours that are close in memory more often).

Each line printed is a JSON object: the graph, op, dtype, rows and edges, the median time
over --iters runs after --warmup runs (CUDA events on a GPU), and the bytes the op's
tensors hold (inputs read and outputs written once each, an expanded index counted once: no
access-pattern rounding, no zero fill, no read-modify-write).

    python tools/oracle/graph_kernels.py > graph_kernels.jsonl            # on a CUDA GPU
    python tools/oracle/graph_kernels.py --device cpu --scale 0.001       # a smoke test

On an H200 the largest tensors are [4,077,843, 1024] fp32 (16.7 GB); the peak stays under
60 GB. The whole run is a few hundred kernels of at most tens of milliseconds each.
"""

import argparse
import json
import statistics
import sys
import time

import torch

# name: (source rows, destination rows, edges, channels, heads)
GRAPHS = {
    # Bris (internal/testmodels/bris.go): processor multi-scale edges (8 per node, memsh's
    # estimate), encoder KNN 12 per hidden node, decoder KNN 3 per grid point.
    "bris_processor": (261_634, 261_634, 2_093_072, 1024, 16),
    "bris_encoder": (1_359_281, 261_634, 3_139_608, 1024, 16),
    "bris_decoder": (261_634, 1_359_281, 4_077_843, 1024, 16),
    # anemoi-core PR #631's graphs (sim/graph/conv_time_test.go), 512 channels.
    "pr631_h_to_h": (40_962, 40_962, 327_600, 512, 16),
    "pr631_h_to_era": (40_962, 542_080, 1_626_240, 512, 16),
}

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def timer(device, warmup, iters):
    """A function timing fn() on device: the median seconds over iters runs."""

    def run(fn):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(iters):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
        return statistics.median(times)

    return run


def nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def indices(src_rows, dst_rows, edges, device, gen):
    """Sorted destination indices (exactly edges / dst_rows per row when it divides) and
    uniform random source indices, int64 as PyG's edge_index."""
    if edges % dst_rows == 0:
        dst = torch.arange(dst_rows, device=device).repeat_interleave(edges // dst_rows)
    else:
        dst = torch.randint(dst_rows, (edges,), device=device, generator=gen).sort().values
    src = torch.randint(src_rows, (edges,), device=device, generator=gen)
    return src, dst


def measure(name, graph, dtype_name, device, run, scale, gen):
    src_rows, dst_rows, edges, c, h = graph
    src_rows, dst_rows, edges = (max(1, int(n * scale)) for n in (src_rows, dst_rows, edges))
    dt = DTYPES[dtype_name]
    src, dst = indices(src_rows, dst_rows, edges, device, gen)

    def emit(op, seconds, moved, **extra):
        row = {"graph": name, "op": op, "dtype": dtype_name, "src_rows": src_rows, "dst_rows": dst_rows,
               "edges": edges, "channels": c, "heads": h, "seconds": seconds, "bytes": moved}
        row.update(extra)
        print(json.dumps(row), flush=True)

    def randn(*shape, dtype=dt):
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen)

    for which, rows, index in (("src", src_rows, src), ("dst", dst_rows, dst)):
        x = randn(rows, c)
        out = x.index_select(0, index)
        emit("index_select", run(lambda: x.index_select(0, index)), nbytes(index, out) + nbytes(x), index=which)
        grad = out
        del out
        emit("index_add", run(lambda: torch.zeros(rows, c, device=device, dtype=dt).index_add_(0, index, grad)),
             nbytes(index, grad, x), index=which)
        del x, grad

    expanded = dst.view(-1, 1).expand(-1, c)
    msg = randn(edges, c)
    res = torch.zeros(dst_rows, c, device=device, dtype=dt)
    emit("scatter_add", run(lambda: torch.zeros(dst_rows, c, device=device, dtype=dt).scatter_add_(0, expanded, msg)),
         nbytes(dst, msg, res), index="dst")
    emit("gather", run(lambda: res.gather(0, expanded)), nbytes(dst, res, msg), index="dst")
    del res

    other = randn(edges, c)
    emit("add", run(lambda: msg + other), 3 * nbytes(msg))
    del other
    for alpha_name, alpha_dtype in (("mul_bcast", dt), ("mul_bcast_fp32", torch.float32)):
        alpha = randn(edges, h, dtype=alpha_dtype)
        v = msg.view(edges, h, c // h)
        out = v * alpha.view(edges, h, 1)
        emit(alpha_name, run(lambda: v * alpha.view(edges, h, 1)), nbytes(msg, alpha, out))
        del alpha, out
    scores = msg.view(edges, h, c // h).sum(-1)
    emit("sum_heads", run(lambda: msg.view(edges, h, c // h).sum(-1)), nbytes(msg, scores))
    del msg, scores, expanded
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply rows and edges (channels stay)")
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator(device=device).manual_seed(20)
    env = {"torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    print(json.dumps({"env": env}), flush=True)
    run = timer(device, args.warmup, args.iters)
    for name in args.graphs.split(","):
        for dtype_name in args.dtypes.split(","):
            with torch.no_grad():
                measure(name, GRAPHS[name], dtype_name, device, run, args.scale, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
