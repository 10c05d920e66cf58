"""What an NCCL communicator adds to the device, outside PyTorch's caching allocator, split by cause.

fsdp1.jsonl measured 583,008,256 B between a one-rank NCCL group's creation and its first collective's end
(torch 2.11, NCCL 2.28.9, H200): one number, three candidate causes that memsh would model differently:

  - NCCL's kernels loaded into the context: ncclInitKernelsForDevice (src/enqueue.cc) calls
    cudaFuncGetAttributes on every NCCL kernel, which under lazy module loading loads each one, and a kernel
    needing more local memory than the context reserves grows the reservation (NCCL_SET_STACK_SIZE, init.cc):
    once per process;
  - per channel, three device callocs (initChannel, src/channel.cc: devPeers twice and devRingUserRanks),
    each rounded up to the cuMem granularity (2 MiB) under NCCL_CUMEM_ENABLE (the default since 2.19), and a
    few per communicator (devCommSetup, init.cc): per communicator, whatever its size;
  - buffers: a one-rank all-reduce is a copy (enqueue.cc: nRanks == 1), so no ring is connected.

Each configuration runs in a fresh process (a subprocess of this script) with world_size 1 and records the
device's used memory (torch.cuda.mem_get_info) after the context, after init_process_group, after the first
collective on the default group and after the first collective on each of two more one-rank groups
(dist.new_group), the stack size limit (cudaDeviceGetLimit) before and after, and NCCL's INIT and ALLOC log
(NCCL_DEBUG_FILE): the channel count and every device allocation's requested size. Configurations: the
default; CUDA_MODULE_LOADING=EAGER (the kernels are in the context before NCCL starts); NCCL_CUMEM_ENABLE=0
(cudaMalloc, no 2 MiB rounding per calloc); NCCL_MAX_NCHANNELS=1 (the per-channel part gone).

    python3 tools/oracle/cuda_nccl_comm.py --out nccl_comm.jsonl --logs DIR
    python3 tools/oracle/cuda_nccl_comm.py --out /tmp/smoke.jsonl --logs /tmp/ncl --device cpu   # smoke (gloo)
"""
import argparse
import ctypes
import glob
import json
import os
import re
import subprocess
import sys

CONFIGS = {
    "default": {},
    "eager_modules": {"CUDA_MODULE_LOADING": "EAGER"},
    "no_cumem": {"NCCL_CUMEM_ENABLE": "0"},
    "one_channel": {"NCCL_MAX_NCHANNELS": "1"},
}


def cudart():
    """libcudart as torch ships it, for cudaDeviceGetLimit; None when not found."""
    import torch
    roots = [os.path.dirname(torch.__file__)] + [os.path.join(p, "nvidia") for p in sys.path if os.path.isdir(os.path.join(p, "nvidia"))]
    for root in roots:
        for lib in sorted(glob.glob(os.path.join(root, "**", "libcudart.so*"), recursive=True)):
            try:
                return ctypes.CDLL(lib)
            except OSError:
                continue
    return None


def stack_limit(rt):
    if rt is None:
        return None
    v = ctypes.c_size_t(0)
    err = rt.cudaDeviceGetLimit(ctypes.byref(v), 0)  # cudaLimitStackSize
    return v.value if err == 0 else f"error {err}"


def child(a):
    """One configuration: the figures of one process."""
    import torch
    import torch.distributed as dist
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"

    def used():
        if not cuda:
            return 0
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return total - free

    rec = {"config": a.child, "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL", "CUDA_MODULE"))}}
    rt = cudart() if cuda else None
    if cuda:
        torch.cuda.set_device(0)
        torch.zeros(1, device=dev)  # the context first
    rec["used_after_context"] = used()
    rec["stack_before"] = stack_limit(rt)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", a.port)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    rec["used_after_init"] = used()
    groups = [None] + [dist.new_group([0]) for _ in range(2)]
    for i, g in enumerate(groups):
        x = torch.ones(1 << 20, device=dev)
        dist.all_reduce(x, group=g)
        del x
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        rec[f"used_after_comm{i + 1}"] = used()
        rec["reserved_after_comm%d" % (i + 1)] = torch.cuda.memory_reserved() if cuda else 0
    rec["stack_after"] = stack_limit(rt)
    if cuda:
        rec["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        rec["torch"] = torch.__version__
        rec["sms"] = torch.cuda.get_device_properties(0).multi_processor_count
    dist.destroy_process_group()
    print(json.dumps(rec), flush=True)


ALLOC = re.compile(r"(\S+:\d+) Cuda Alloc Size (\d+)")
CHANNEL = re.compile(r"Channel (\d+)/(\d+)")


def read_log(path):
    """The device allocations (site, requested bytes) and the channel count NCCL's log names."""
    allocs, channels = [], 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = ALLOC.search(line)
                if m:
                    allocs.append([m.group(1), int(m.group(2))])
                m = CHANNEL.search(line)
                if m:
                    channels = max(channels, int(m.group(2)))
    except OSError as e:
        return {"log_error": str(e)}
    sites = {}
    for site, n in allocs:
        s = sites.setdefault(site, [0, 0])
        s[0] += 1
        s[1] += n
    return {"channels_logged": channels, "device_allocs": len(allocs), "device_alloc_bytes": sum(n for _, n in allocs),
            "device_allocs_2mib": sum(-(-n // (2 << 20)) * (2 << 20) for _, n in allocs), "alloc_sites": sites}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--logs", required=True, help="folder for NCCL's logs")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--port", default="29611")
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    os.makedirs(a.logs, exist_ok=True)
    for k, name in enumerate(a.configs.split(",")):
        log = os.path.join(a.logs, f"nccl_{name}.log")
        env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ALLOC", NCCL_DEBUG_FILE=log, **CONFIGS[name])
        cmd = [sys.executable, os.path.abspath(__file__), "--out", a.out, "--logs", a.logs, "--device", a.device,
               "--child", name, "--port", str(int(a.port) + k)]
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
            rec = json.loads(lines[-1]) if lines else {"config": name, "error": p.stderr[-2000:], "rc": p.returncode}
        except subprocess.TimeoutExpired:
            rec = {"config": name, "error": "timed out after 120 s"}
        rec.update(read_log(log))
        with open(a.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        figs = {k: rec.get(k) for k in ("used_after_context", "used_after_comm1", "used_after_comm2", "used_after_comm3",
                                         "stack_before", "stack_after", "channels_logged", "device_allocs_2mib")}
        print(name, figs, flush=True)


if __name__ == "__main__":
    main()
