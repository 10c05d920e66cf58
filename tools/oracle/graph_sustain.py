"""Bris's processor convolution run back to back for tens of seconds, with the board's clock and power.

Prepared in session 23 (bris32, issue 20), not yet run. memsh prices PyG's message passing on an H200 at
rates graph_kernels.py and graph_conv.py measured with a few calls each (sim/testdata/cuda_h200): the board
at its full 1,980 MHz SM clock. A Bris training step keeps the GPU busy for 20-33 s. Under 8192^3 GEMMs back
to back the same board reached its 700 W cap within ~100 ms and its SM clock fell to a median 1,485 MHz
(cuda_profile.py, runs 4 and 6; docs/time.md "GEMMs by shape"). Whether PyG's kernels (index_add_ and
scatter_add_ are limited in the SMs, not by DRAM: sim/hw/graph_rates.go) draw enough to be capped is not
measured. This script measures it at Bris's processor shapes (2,093,072 edges, 1024 channels, 16 heads),
as anemoi-models 0.8.1's conv runs it (graph_conv.py's conv), under fp16 autocast as Bris trains:

  isolated   graph_conv.py's harness: --warmup calls, then --iters forward + backward calls, each timed alone
             with CUDA events and a sync between calls, after a 2 s idle (the rate memsh has)
  sustained  forward + backward back to back for --seconds, one CUDA event pair per iteration, no sync
             between iterations; each iteration's wall-clock time of recording, to match the clocks
  clocks     nvidia-smi every 20 ms in a side process (SM clock, power, temperature, throttle reasons),
             written to graph_sustain_clocks.csv beside --out

One JSON line per record in --out. The record "summary" has the isolated median, the sustained median of
the first 0.5 s and of the last half, and their ratio: memsh's graph rates hold for a whole step if the
ratio is near 1. About --seconds + 15 s on an H200, ~70 GB of device memory, torch alone (no PyG).

    mkdir -p .oracle && cp tools/oracle/graph_conv.py tools/oracle/graph_sustain.py .oracle/
    # device machine, carry [".oracle"], timeout_s 120:
    python3 .oracle/graph_sustain.py --out $OUT/graph_sustain.jsonl --seconds 40

    python3 tools/oracle/graph_sustain.py --device cpu --scale 0.001 --seconds 1 --out /tmp/s.jsonl  # smoke
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_conv  # noqa: E402  (the conv as anemoi-models 0.8.1 runs it, and its index layout)


def emit(path, rec):
    line = json.dumps(rec)
    print(line[:300], file=sys.stderr, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def clocks_start(path):
    try:
        return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                                 "clocks_throttle_reasons.active", "--format=csv,noheader", "-lms", "20"],
                                stdout=open(path, "w"), stderr=subprocess.DEVNULL)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply rows and edges (channels stay)")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long the sustained part runs")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    gen = torch.Generator(device=device).manual_seed(631)
    env = {"part": "env", "torch": torch.__version__, "device": str(device)}
    if cuda:
        env.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda)
    emit(args.out, env)
    smi = None
    if cuda:
        smi = clocks_start(os.path.join(os.path.dirname(os.path.abspath(args.out or ".")), "graph_sustain_clocks.csv"))

    src_rows, dst_rows, edges, c, h, _ = graph_conv.GRAPHS["bris_processor"]
    src_rows, dst_rows, edges = (max(1, int(n * args.scale)) for n in (src_rows, dst_rows, edges))
    src, dst = graph_conv.indices(src_rows, dst_rows, edges, device, gen)
    dt = torch.float16  # Bris: precision 16-mixed (ensemble.yaml), fp16 autocast

    def leaf(rows):
        return torch.randn(rows, h, c // h, device=device, dtype=dt, generator=gen).requires_grad_()

    q, k, v, e = leaf(dst_rows), leaf(src_rows), leaf(src_rows), leaf(edges)
    ctx = torch.autocast(device.type, dtype=dt, enabled=cuda)
    with torch.no_grad(), ctx:
        grad = torch.randn_like(graph_conv.conv(q, k, v, e, src, dst, dst_rows))

    def step():
        for x in (q, k, v, e):
            x.grad = None
        with ctx:
            out = graph_conv.conv(q, k, v, e, src, dst, dst_rows)
        out.backward(grad)

    # isolated: as graph_conv.py times it, after the board has idled
    if cuda:
        torch.cuda.synchronize(device)
    time.sleep(2.0)
    iso = []
    for i in range(args.warmup + args.iters):
        graph_conv.sync(device)
        t = graph_conv.timed(device, step)
        if i >= args.warmup:
            iso.append(t)
    emit(args.out, {"part": "isolated", "iters_s": iso, "median_s": statistics.median(iso)})

    # sustained: back to back, events read at the end
    graph_conv.sync(device)
    t_start = time.time()
    marks = []  # (wall time of recording, start event, end event) or (wall, seconds) on the CPU
    while time.time() - t_start < args.seconds:
        w = time.time()
        if cuda:
            s, f = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            f.record()
            marks.append((w, s, f))
            if len(marks) % 8 == 0:
                marks[-8][2].synchronize()  # keep the CPU at most ~8 iterations ahead
        else:
            step()
            marks.append((w, time.time() - w))
    graph_conv.sync(device)
    its = [(w, s.elapsed_time(f) / 1e3) for w, s, f in marks] if cuda else marks
    emit(args.out, {"part": "sustained", "t_wall_start": t_start, "iters": [[round(w - t_start, 4), t] for w, t in its]})
    if smi is not None:
        smi.terminate()

    first = [t for w, t in its if w - t_start < 0.5] or [its[0][1]]
    half = [t for w, t in its if w - t_start >= args.seconds / 2] or [its[-1][1]]
    summ = {"part": "summary", "edges": edges, "channels": c, "heads": h, "mode": "fp16-autocast",
            "isolated_median_s": statistics.median(iso), "sustained_first_0.5s_median_s": statistics.median(first),
            "sustained_last_half_median_s": statistics.median(half), "iterations": len(its),
            "last_half_over_isolated": statistics.median(half) / statistics.median(iso),
            "t_wall_start": t_start}
    emit(args.out, summ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
