"""Time anemoi's PyG GraphTransformerConv message passing whole, forward and backward.

tools/oracle/graph_kernels.py measured PyG's kernels one at a time on an H200, and memsh
prices them from those rates (sim/hw/graph_rates.go). anemoi-core PR #631 timed the whole
graph attention (fp16, ms per forward + backward) 11-16 % under the sum of those kernels at
the shapes memsh takes for it (512 channels, 16 heads; the PR publishes neither its harness
nor its channels and heads), and memsh prices the whole 6-11 % over that sum (sim/graph
conv_time_test.go). This script times the whole thing, as anemoi-models 0.8.1's conv.py
runs it (what sim/graph/conv.go lowers), so the three can be put side by side on one GPU:

  query_i = q.index_select(0, dst); key_j, value_j = k, v .index_select(0, src)
  alpha   = ((query_i * (key_j + e)).sum(-1) / sqrt(d)), PyG's softmax over dst
  msg     = (value_j + e) * alpha[..., None]
  out     = zeros(N, H, d).scatter_add_(0, dst expanded, msg)

with q [N_dst, H, d], k and v [N_src, H, d], e [E, H, d], all requiring gradients; the
backward runs from a random gradient of out. Destination indices sorted, source indices
uniform at random (as graph_kernels.py). PyG's softmax (torch_geometric.utils.softmax):
a scatter-max of the detached scores, exp of the shifted scores, a scatter-sum, the
division by the sum gathered per edge.

Modes: "fp16" (fp16 inputs, no autocast: PR #631's "dtype = fp16") and "bf16-autocast"
(bf16 inputs under torch.autocast: the sum and the softmax in fp32, the message in fp32, as
Bris's trained model runs). Each line printed is a JSON object: graph, mode, shapes, the
median forward and forward + backward times over --iters runs (CUDA events), and the peak
memory allocated.

    python tools/oracle/graph_conv.py > graph_conv.jsonl                    # on a CUDA GPU
    python tools/oracle/graph_conv.py --device cpu --scale 0.001 --iters 1  # a smoke test

On an H200 the largest case (Bris's processor, bf16-autocast: 2,093,072 edges of 1,024
channels, fp32 messages) peaks near 70 GB; the whole run is a few seconds of kernels.
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch

# name: (source rows, destination rows, edges, channels, heads, modes)
GRAPHS = {
    # anemoi-core PR #631 (sim/graph/conv_time_test.go): n320 and TriNodes(6), 512 channels
    # and 16 heads as memsh takes them, and 8 heads (d = 64) and 1024 channels to bracket
    # the PR's unpublished ones.
    "pr631_h_to_h": (40_962, 40_962, 327_600, 512, 16, ("fp16",)),
    "pr631_h_to_era": (40_962, 542_080, 1_626_240, 512, 16, ("fp16",)),
    "pr631_era_to_h": (542_080, 40_962, 852_830, 512, 16, ("fp16",)),
    "pr631_h_to_h_8heads": (40_962, 40_962, 327_600, 512, 8, ("fp16",)),
    "pr631_h_to_h_1024": (40_962, 40_962, 327_600, 1024, 16, ("fp16",)),
    # Bris's processor (internal/testmodels/bris.go): 8 multi-scale edges per node.
    "bris_processor": (261_634, 261_634, 2_093_072, 1024, 16, ("bf16-autocast", "fp16")),
}


def indices(src_rows, dst_rows, edges, device, gen):
    """Sorted destination indices, uniform random source indices (int64)."""
    if edges % dst_rows == 0:
        dst = torch.arange(dst_rows, device=device).repeat_interleave(edges // dst_rows)
    else:
        dst = torch.randint(dst_rows, (edges,), device=device, generator=gen).sort().values
    src = torch.randint(src_rows, (edges,), device=device, generator=gen)
    return src, dst


def scatter_sum(x, index, rows):
    """torch_geometric.utils.scatter(x, index, 0, rows, reduce="sum") for x [E, ...]."""
    idx = index.view(-1, *([1] * (x.dim() - 1))).expand_as(x)
    return x.new_zeros((rows,) + tuple(x.shape[1:])).scatter_add_(0, idx, x)


def scatter_max(x, index, rows):
    """torch_geometric.utils.scatter(..., reduce="max"): scatter_reduce amax, no self."""
    idx = index.view(-1, *([1] * (x.dim() - 1))).expand_as(x)
    out = x.new_zeros((rows,) + tuple(x.shape[1:]))
    return out.scatter_reduce_(0, idx, x, reduce="amax", include_self=False)


def softmax(alpha, index, rows):
    """torch_geometric.utils.softmax(alpha, index, num_nodes=rows)."""
    amax = scatter_max(alpha.detach(), index, rows)
    out = (alpha - amax.index_select(0, index)).exp()
    den = scatter_sum(out, index, rows).index_select(0, index)
    return out / (den + 1e-16)


def conv(q, k, v, e, src, dst, rows):
    """GraphTransformerConv.propagate's collect, message and sum aggregation."""
    d = q.shape[-1]
    query_i = q.index_select(0, dst)
    key_j = k.index_select(0, src)
    value_j = v.index_select(0, src)
    key_j = key_j + e
    alpha = (query_i * key_j).sum(dim=-1) / math.sqrt(d)
    alpha = softmax(alpha, dst, rows)
    value_j = value_j + e
    msg = value_j * alpha.view(-1, alpha.shape[1], 1)
    return scatter_sum(msg, dst, rows)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device, fn):
    """Seconds fn() takes: CUDA events on a GPU, the wall clock otherwise."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(name, graph, device, args, gen):
    src_rows, dst_rows, edges, c, h, modes = graph
    src_rows, dst_rows, edges = (max(1, int(n * args.scale)) for n in (src_rows, dst_rows, edges))
    src, dst = indices(src_rows, dst_rows, edges, device, gen)
    for mode in modes:
        dt = torch.float16 if mode == "fp16" else torch.bfloat16

        def leaf(rows):
            return torch.randn(rows, h, c // h, device=device, dtype=dt, generator=gen).requires_grad_()

        q, k, v, e = leaf(dst_rows), leaf(src_rows), leaf(src_rows), leaf(edges)
        ctx = torch.autocast(device.type, dtype=dt) if mode.endswith("autocast") else torch.autocast(device.type, enabled=False)

        def forward():
            with ctx:
                return conv(q, k, v, e, src, dst, dst_rows)

        with torch.no_grad(), ctx:
            grad = torch.randn_like(conv(q, k, v, e, src, dst, dst_rows))
        fwd, both = [], []
        for i in range(args.warmup + args.iters):
            for x in (q, k, v, e):
                x.grad = None
            sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            holder = {}
            t_fwd = timed(device, lambda: holder.__setitem__("out", forward()))
            t_bwd = timed(device, lambda: holder["out"].backward(grad))
            if i >= args.warmup:
                fwd.append(t_fwd)
                both.append(t_fwd + t_bwd)
            del holder
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
        print(json.dumps({"graph": name, "mode": mode, "src_rows": src_rows, "dst_rows": dst_rows, "edges": edges,
                          "channels": c, "heads": h, "fwd_ms": 1e3 * statistics.median(fwd),
                          "fwd_bwd_ms": 1e3 * statistics.median(both), "peak_allocated": peak}), flush=True)
        del q, k, v, e, grad
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply rows and edges (channels stay)")
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator(device=device).manual_seed(631)
    env = {"torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    print(json.dumps({"env": env}), flush=True)
    for name in args.graphs.split(","):
        measure(name, GRAPHS[name], device, args, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
