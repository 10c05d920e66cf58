"""The CUDA context's local-memory reservation per SM (issue 28): the term by which memsh's H100 PCIe context
differs from the H200's measured one (sim/hw/catalog.go, gh100Context).

memsh takes the reservation as NVIDIA describes it, "MAX_THREADS_PER_SM x SMs x LOCAL_MEM_PER_THREAD"
(forums.developer.nvidia.com/t/local-memory-management/289339/9), at the default stack of 1 KiB a thread:
2,048 x 1,024 B = 2 MiB an SM on sm_90, and assumes no kernel of a training step raised the stack. One fresh
process records, after each stage, the device's used memory (torch.cuda.mem_get_info), the allocator's
reserve, what lies outside it, and the stack limit (cudaDeviceGetLimit): init and one tensor, the first bf16
matmul (cuBLAS), the first SDPA forward and backward (cuDNN attention on Hopper), then the stack limit set to
2 KiB and to 4 KiB (cudaDeviceSetLimit) with a kernel launched after each. The formula holds where each 1 KiB
step adds SMs x threads_per_sm x 1 KiB (264 MiB on 132 SMs), and the default holds where the stack is still
1,024 B after SDPA. A few seconds on an H200, torch alone:

    python3 tools/oracle/cuda_context_sm.py --out $OUT/context_sm.jsonl
"""
import argparse
import ctypes
import json

from cuda_nccl_comm import cudart, stack_limit


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F

    rt = cudart()
    props = torch.cuda.get_device_properties(0)
    rows = []

    def record(stage):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        used, reserved = total - free, torch.cuda.memory_reserved()
        rows.append({"stage": stage, "used": used, "reserved": reserved, "outside": used - reserved,
                     "stack": stack_limit(rt)})

    x = torch.ones(1, device="cuda")
    record("init and one tensor")
    m = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (m @ m).sum().item()
    record("first bf16 matmul")
    q = torch.randn(4, 16, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    record("first SDPA forward and backward")
    for size in (2048, 4096):
        err = rt.cudaDeviceSetLimit(0, ctypes.c_size_t(size)) if rt is not None else "no libcudart"
        (x + 1).item()
        record(f"stack limit set to {size} B (cudaDeviceSetLimit: {err})")
    sms = props.multi_processor_count
    threads = getattr(props, "max_threads_per_multi_processor", None)
    head = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": props.name, "sms": sms,
            "threads_per_sm": threads}
    steps = [rows[i]["outside"] - rows[i - 1]["outside"] for i in (3, 4)]
    if threads:
        head["predicted_per_kib"] = sms * threads * 1024
    head["measured_per_kib"] = [steps[0], steps[1] // 2]
    with open(a.out, "w") as f:
        f.write(json.dumps({"part": "context_sm", **head}) + "\n")
        for r in rows:
            f.write(json.dumps({"part": "context_sm", **r}) + "\n")
    print(json.dumps(head))


if __name__ == "__main__":
    main()
