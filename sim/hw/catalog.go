package hw

import (
	"fmt"
	"github.com/memsh/memsh/sim/units"
	"sort"
	"strings"
)

// catalogMiB is one MiB; nvidia-smi reports totals in MiB.
const catalogMiB int64 = 1 << 20

// Conventions for every catalog entry:
//
//   - Memory is what PyTorch sees: torch.cuda.get_device_properties().
//     total_memory (the CUDA runtime's totalGlobalMem), which PyTorch's OOM
//     message calls the "total capacity". It is below nvidia-smi's total
//     by what the driver reserves for itself (about 450-900 MiB on recent
//     drivers, none on ROCm), and it is what a step must fit in. Each entry
//     quotes its evidence (deviceQuery's "Total amount of global memory",
//     a printed torch device, or an OOM message; TestCatalogCapacities
//     holds the quotes); where none was found the nvidia-smi total stands
//     in and the source says so.
//   - SMIMemory is nvidia-smi's memory.total (rocm-smi's VRAM total on
//     AMD), in MiB converted to bytes exactly: what a user compares
//     device_used with on the machine.
//   - BF16TFLOPS is the dense (not 2:4 sparse) bf16/fp16 tensor-core peak
//     with fp32 accumulation; FP8TFLOPS likewise, 0 when unsupported.
//   - LinkGBps and PCIeGBps are per direction (half the bidirectional
//     figure that datasheets print). LinkGBps is 0 for PCIe-only cards.
//   - PCIe per direction: Gen3 x16 16 GB/s, Gen4 x16 32 GB/s, Gen5 x16
//     64 GB/s (calibration.md D2).
//   - Context is the CUDA context plus loaded kernels with lazy module
//     loading (CUDA_MODULE_LOADING=LAZY, the default from CUDA 11.7 and
//     PyTorch 1.13), by GPU generation: the median of what PyTorch's
//     out-of-memory messages (torch 2.1+) show outside its allocator on
//     that generation's cards, context_oom_test.go (Volta 363 MiB; Ampere
//     and Ada 500 MiB, their rows' median 504 MiB within the messages'
//     rounding). Hopper, Blackwell and AMD cards have no such row yet:
//     the Ampere/Ada figure stands in, and the source says so.
//     CurrentContext is the context measured with torch 2.11 and CUDA
//     13.0 (runtime "cuda"): the H200's (h200LazyContext), which the
//     other GH100 cards take by the argument of gh100Context below.
//     EagerContext is a card's context measured with eager loading: the
//     V100's 1,343 MiB of calibration.md B1 row 0 (torch 1.x, CUDA 10/11);
//     CurrentEagerContext the same with torch 2.11 and CUDA 13.0 (the
//     H200's h200EagerContext).
//
// "thamada" below is github.com/thamada/nvidia-smi at c4c8a46, files
// gls/<card>_deviceQuery.py and gls/<card>_smi.py: deviceQuery and
// nvidia-smi captured on the same machines.
// "cal D1" below means shared/research/calibration.md section D1.
// catalogLazyContext is the Ampere and Ada figure (context_oom_test.go).
const catalogLazyContext = 500 * catalogMiB

// h200LazyContext is what a training process held on one H200 outside
// PyTorch's allocator after a step of GPT-2 blocks with SDPA (cuBLAS and
// cuDNN attention loaded): torch.cuda.mem_get_info()'s used less
// memory_reserved(), 766.81 MiB. Measured on one H200,
// sim/testdata/cuda_h200, tools/oracle/cuda_run.sh (torch 2.11.0+cu130,
// CUDA 13.0, cuDNN 9.19, driver 580.159.04, lazy loading): suite case 2
// (context_h200_test.go has every case, 750.8 to 770.8 MiB, and the
// stages of cuda_extra.py's context section).
const h200LazyContext = 804_061_184

// h200EagerContext is h200LazyContext's stage with eager module loading
// (CUDA_MODULE_LOADING=EAGER, every kernel of each library loaded with the
// library): the same H200 stack, cuda_extra.py's context section run
// again with that variable (run 5, sim/testdata/cuda_h200/
// context_eager.jsonl), outside the allocator after the first SDPA forward
// and backward (cuBLAS and cuDNN attention loaded): 1,961,689,088 B used
// less 77,594,624 reserved. A training step launches no library the
// stage has not loaded, so the figure holds through it (a convolution's
// cuDNN libraries would add 196 MiB more: context_h200_test.go).
const h200EagerContext = 1_884_094_464

// The GH100 cards (H100 SXM, H100 PCIe, H100 NVL, H200) on the current
// stack take the H200's measured context, less what depends on the SM
// count. What a process holds outside the allocator is:
//
//   - the driver's per-context state and its local-memory reservation. The
//     reservation is context-wide, "calculated as MAX_THREADS_PER_SM x SMs
//     x LOCAL_MEM_PER_THREAD" (NVIDIA, forums.developer.nvidia.com/t/
//     local-memory-management/289339/9), and the driver "automatically
//     increases the per-thread stack size for each kernel launch as
//     needed. This size isn't reset" (cuCtxSetLimit, CU_LIMIT_STACK_SIZE,
//     CUDA driver API). Per SM it is 2,048 threads (sm_90: "Maximum number
//     of threads per multiprocessor: 2048", thamada gls/H100NVLx2_
//     deviceQuery.py) times the stack: 2 MiB at CUDA's default 1 KiB
//     (gh100StackPerSM). It scales with the SM count, not the memory;
//   - the module images loaded so far (lazy loading: the kernels launched),
//     sm_90 cubins of the same libraries on every GH100 card: they depend
//     on the job, the torch/CUDA release and the architecture, not on the
//     SM count or the memory size;
//   - cuBLAS's and cuDNN's handles and kernels, outside the allocator
//     (+66 and +16 MiB on the H200, context_h200_test.go); their
//     workspaces are inside it, where the replay allocates them
//     (core/cublas.go), so the context does not count them again.
//
// Nothing of it grows with the memory size: the driver's own reserve,
// which does (615 MiB on the H200, 453 on the H100 SXM), lies outside
// PyTorch's total_memory and is SMIMemory less Memory, counted apart. So
// a card with the H200's 132 SMs (H100 SXM: NVIDIA's Hopper whitepaper;
// H100 NVL: thamada gls/H100NVLx2_deviceQuery.py) takes the H200's
// figures as they are, and the H100 PCIe (114 SMs: docs.nvidia.com/
// launchpad/ai/h100-mig, "114 SMs per GPU") 18 SMs' reservation less
// (gh100Context). The stack the step left is taken at its 1 KiB default:
// a kernel needing more raises it on every SM, and the PCIe card's figure
// is then 36 MiB high for each KiB above it (tools/oracle/
// cuda_context_sm.py, prepared, reads the stack after each stage on the
// H200). On the older stacks every GH100 card keeps the Ampere/Ada figure
// (two H100 PCIe rows on torch 2.9 show 600 MiB: context_oom_test.go
// records them, one card kind on one release, and does not use them).

// gh100StackPerSM is the driver's local-memory reservation per SM of a
// GH100 card at CUDA's default stack of 1 KiB a thread: 2,048 resident
// threads x 1,024 B.
const gh100StackPerSM int64 = 2048 * 1024

// h200SMs is the SM count of the H200, the card the GH100 figures were
// measured on: the H100 SXM's 132 (the H200 is the same GH100 part with
// HBM3e; cuda_context_sm.py prints the count).
const h200SMs = 132

// gh100Context is the H200's measured context (lazy, or eager when
// eager) for a GH100 card of sms SMs: the local-memory reservation of the
// SMs it lacks, at the default stack, taken off.
func gh100Context(sms int64, eager bool) int64 {
	c := int64(h200LazyContext)
	if eager {
		c = h200EagerContext
	}
	return c - (h200SMs-sms)*gh100StackPerSM
}

// voltaLazyContext is the V100's context with lazy module loading: the
// median of its two rows in context_oom_test.go (360.6 and 366.2 MiB).
const voltaLazyContext = 363 * catalogMiB

// Catalog returns the known devices, a fresh slice on every call.
func Catalog() []Device {
	return []Device{
		{
			// V100 has no bf16; BF16TFLOPS holds its fp16 tensor peak.
			Name: "V100-16GB", Memory: 16_160 * catalogMiB, SMIMemory: 16_160 * catalogMiB,
			BF16TFLOPS: 125, FP32TFLOPS: 15.7, HBMGBps: 900,
			LinkGBps: 150, PCIeGBps: 16, Context: voltaLazyContext, EagerContext: 1_343 * catalogMiB,
			Kernels: voltaRates, Host: dgx1Host,
			Source: "cal D1 (V100 SXM2, RECALLED): 125 TFLOPS fp16 tensor, 900 GB/s, NVLink2 300 GB/s; " +
				"nvidia-smi total 16,160 MiB for V100-SXM2-16GB; PyTorch's total_memory not found in a public " +
				"source: the nvidia-smi total stands in (optimistic by the driver's reserve, if any); " +
				"context 363 MiB with lazy loading (torch 2.1+ OOM messages, context_oom_test.go), 1,343 MiB measured with eager " +
				"loading (torch 1.x), cal B1 row 0",
		},
		{
			Name: "V100-32GB", Memory: 32_502 * catalogMiB, SMIMemory: 32_510 * catalogMiB,
			BF16TFLOPS: 125, FP32TFLOPS: 15.7, HBMGBps: 900,
			LinkGBps: 150, PCIeGBps: 16, Context: voltaLazyContext, EagerContext: 1_343 * catalogMiB,
			Kernels: voltaRates, Host: dgx2Host,
			Source: "cal D1 (V100 SXM2, RECALLED); PyTorch total 31.74 GiB (32,502 MiB) in the OOM message of " +
				"haotian-liu/LLaVA issue 812 (8 x V100); nvidia-smi total 32,510 MiB for V100-SXM2-32GB (RECALLED); " +
				"context as V100-16GB (same chip): 363 MiB lazy (context_oom_test.go), 1,343 MiB eager, cal B1 row 0",
		},
		{
			Name: "A100-40GB", Memory: 42_298_834_944, SMIMemory: 40_960 * catalogMiB,
			BF16TFLOPS: 312, FP32TFLOPS: 19.5, HBMGBps: 1_555,
			LinkGBps: 300, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: ampereRates, Host: dgxA100Host,
			Source: "cal D1 (A100 SXM4 40GB datasheet): 312 TFLOPS, 1,555 GB/s, NVLink3 600 GB/s; " +
				"PyTorch total 42,298,834,944 B = 39.39 GiB (deviceQuery of an A100-SXM4-40GB, driver 535, " +
				"bottlerocket-os/bottlerocket PR 3873; OOM messages show 39.50-39.59 GiB on older drivers, cal F); " +
				"nvidia-smi total 40,960 MiB (modal-labs/modal-client PR 2797); PCIe Gen4; " +
				"context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
		{
			Name: "A100-80GB", Memory: 85_100_068_864, SMIMemory: 81_920 * catalogMiB,
			BF16TFLOPS: 312, FP32TFLOPS: 19.5, HBMGBps: 2_039,
			LinkGBps: 300, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: ampereRates, Host: dgxA100Host,
			Source: "cal D1 (A100 SXM4 80GB datasheet): 312 TFLOPS, 2,039 GB/s, NVLink3 600 GB/s; " +
				"PyTorch total 85,100,068,864 B = 79.26 GiB (thamada A100SXMx4 deviceQuery, driver 555; OOM " +
				"messages show 79.14-79.25 GiB, cal F); nvidia-smi total 81,920 MiB (thamada A100SXMx4 smi); " +
				"PCIe Gen4; context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
		{
			Name: "H100-80GB", Memory: 85_045_477_376, SMIMemory: 81_559 * catalogMiB,
			BF16TFLOPS: 989.4, FP32TFLOPS: 66.9, FP8TFLOPS: 1_979, HBMGBps: 3_350,
			LinkGBps: 450, PCIeGBps: 64, Context: catalogLazyContext,
			CurrentContext: gh100Context(132, false), CurrentEagerContext: gh100Context(132, true),
			Kernels: hopperRates.withGraph(hopperGraph), Host: dgxH100Host,
			Source: "cal D1 (H100 SXM5 datasheet): 989.4 TFLOPS bf16, 1,979 fp8, 3.35 TB/s, " +
				"NVLink4 450 GB/s per direction; PyTorch total 85,045,477,376 B = 79.20 GiB (thamada H100SXMx8 " +
				"deviceQuery, driver 565; OOM messages show 79.11 GiB on other drivers, vllm-project/vllm issue " +
				"27508); nvidia-smi total 81,559 MiB (thamada H100SXMx8 smi); PCIe Gen5; " +
				"context with torch 2.11 and CUDA 13.0 (runtime \"cuda\"): the H200's 766.8 MiB measured " +
				"(the same GH100 chip and 132 SMs, catalog.go gh100Context), the Ampere/Ada figure of " +
				"context_oom_test.go for the older runtimes (no row on this generation)",
		},
		{
			Name: "H100-PCIe", Memory: 81_090 * catalogMiB, SMIMemory: 81_559 * catalogMiB,
			BF16TFLOPS: 756, FP32TFLOPS: 51, FP8TFLOPS: 1_513, HBMGBps: 2_000,
			LinkGBps: 300, PCIeGBps: 64, Context: catalogLazyContext,
			CurrentContext: gh100Context(114, false), CurrentEagerContext: gh100Context(114, true),
			Kernels: hopperPCIeRates, Host: pcieServerHost,
			Source: "cal D1 (H100 PCIe datasheet): 756 TFLOPS bf16, 1,513 fp8, 2.0 TB/s, " +
				"NVLink bridge 600 GB/s (300 per direction), PCIe Gen5; nvidia-smi total 81,559 MiB assumed " +
				"equal to H100 SXM (RECALLED); PyTorch's total from two public OOM messages on one H100 PCIe " +
				"(torch 2.8-2.9: \"a total capacity of 79.19 GiB\", sim/hw/context_oom_test.go): 81,085-81,095 MiB " +
				"to two decimals, 81,090 MiB taken (469 MiB under the nvidia-smi total, where the H100 SXM's " +
				"driver keeps 453 MiB); " +
				"context with torch 2.11 and CUDA 13.0 (runtime \"cuda\"): the H200's 766.8 MiB measured less " +
				"the driver's local-memory reservation of the 18 SMs it lacks (114 SMs, 2 MiB an SM at the " +
				"default stack: 730.8 MiB, catalog.go gh100Context), the Ampere/Ada figure of context_oom_test.go " +
				"for the older runtimes",
		},
		{
			Name: "H100-NVL", Memory: 99_861_594_112, SMIMemory: 95_830 * catalogMiB,
			BF16TFLOPS: 835, FP32TFLOPS: 60, FP8TFLOPS: 1_670, HBMGBps: 3_900,
			LinkGBps: 300, PCIeGBps: 64, Context: catalogLazyContext,
			CurrentContext: gh100Context(132, false), CurrentEagerContext: gh100Context(132, true),
			Kernels: hopperPCIeRates, Host: pcieServerHost,
			Source: "cal D1 (SECONDARY): 94 GB HBM3, 3.9 TB/s, NVLink 600 GB/s; bf16 835 and fp8 " +
				"1,670 dense are half the datasheet's sparse 1,671/3,341 (RECALLED); PyTorch total " +
				"99,861,594,112 B = 93.00 GiB (thamada H100NVLx2 deviceQuery, driver 550; the same 93.00 GiB in " +
				"the OOM message of ali-vilab/VACE issue 56); nvidia-smi total 95,830 MiB (thamada H100NVLx2 smi, " +
				"NVIDIA/gpu-admin-tools issue 4); context with torch 2.11 and CUDA 13.0 (runtime \"cuda\"): the " +
				"H200's 766.8 MiB measured (the same GH100 chip and 132 SMs, thamada H100NVLx2 deviceQuery; " +
				"catalog.go gh100Context), the Ampere/Ada figure of context_oom_test.go for the older runtimes",
		},
		{
			// The H200 of SEEDS.md story 1: 143,771 MiB exactly.
			Name: "H200", Memory: 150_109_880_320, SMIMemory: 143_771 * catalogMiB,
			BF16TFLOPS: 989, FP32TFLOPS: 66.9, FP8TFLOPS: 1_979, HBMGBps: 4_800,
			LinkGBps: 450, PCIeGBps: 64, Context: catalogLazyContext, CurrentContext: gh100Context(h200SMs, false), CurrentEagerContext: gh100Context(h200SMs, true),
			Kernels: h200Rates.withGraph(hopperGraph).withEager(h200Eager), Host: dgxH200Host,
			Source: "cal D1 (H200 SXM datasheet copies): 989 TFLOPS bf16, 1,979 fp8, 4.8 TB/s, " +
				"NVLink4 900 GB/s; PyTorch total 150,109,880,320 B = 139.80 GiB (measured on one H200, " +
				"sim/testdata/cuda_h200, tools/oracle/cuda_run.sh: torch.cuda.get_device_properties().total_memory, " +
				"driver 580.159.04; torch prints it total_memory=143156MB, ai-bot-pro/achatbot " +
				"deploy/modal/src/llm/vllm/vlm/skywork_r1v.py; OOM messages on 8 x H200 show 139.81 GiB, " +
				"sungwon-chae/arxiv_confi etu_logging.md); nvidia-smi total 143,771 MiB (the same run; the card of " +
				"SEEDS.md story 1); context: 766.8 MiB measured after a training step with torch 2.11 and CUDA 13.0 " +
				"(lazy loading; the same run, context_h200_test.go; runtime \"cuda\"), the Ampere/Ada figure of " +
				"context_oom_test.go for the older runtimes (not measured on this generation)",
		},
		{
			Name: "B200", Memory: 182_642 * catalogMiB, SMIMemory: 183_359 * catalogMiB,
			BF16TFLOPS: 2_250, FP32TFLOPS: 75, FP8TFLOPS: 4_500, HBMGBps: 8_000,
			LinkGBps: 900, PCIeGBps: 64, Context: catalogLazyContext,
			Kernels: blackwellRates, Host: dgxB200Host,
			Source: "cal D1 (B200 HGX 1000 W): 2,250 TFLOPS bf16, 4,500 fp8, 8 TB/s, NVLink5 1.8 TB/s; " +
				"PyTorch total 182,642 MiB = 178.36 GiB (torch's printed device, total_memory=182642MB, in " +
				"ai-bot-pro/achatbot deploy/modal/src/llm/vllm/vlm/skywork_r1v.py); nvidia-smi total 183,359 MiB " +
				"(NVIDIA/TensorRT-LLM issue 10278; = 179 GiB, cal D1's 179 GB usable); fp32 75 RECALLED; " +
				"context: the Ampere/Ada figure of context_oom_test.go stands in (no row on this generation)",
		},
		{
			Name: "MI300X", Memory: 196_592 * catalogMiB, SMIMemory: 196_592 * catalogMiB,
			BF16TFLOPS: 1_307.4, FP32TFLOPS: 163.4, FP8TFLOPS: 2_614.9, HBMGBps: 5_300,
			LinkGBps: 448, PCIeGBps: 64, Context: catalogLazyContext,
			Kernels: mi300Rates, Host: mi300xHost,
			Source: "cal D1 (AMD datasheet, RECALLED): 1,307.4 TFLOPS bf16, 2,614.9 fp8, 5.3 TB/s, " +
				"Infinity Fabric 896 GB/s (448 per direction); PyTorch total (HIP totalGlobalMem) 196,592 MiB " +
				"(thamada MI300X_x4 deviceQuery, \"196592: Total Global Memory (MB)\"); rocm-smi's VRAM total " +
				"is the same 196,592 MiB = 8 CPX partitions of 25,767,706,624 B (ROCm/legacy-rocm-build issue " +
				"4750): ROCm reserves none of it; fp32 163.4 RECALLED; " +
				"context: the CUDA typical value, not measured on ROCm",
		},
		{
			Name: "L40S", Memory: 47_803_596_800, SMIMemory: 46_068 * catalogMiB,
			BF16TFLOPS: 362.05, FP32TFLOPS: 91.6, FP8TFLOPS: 733, HBMGBps: 864,
			LinkGBps: 0, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: adaRates, Host: pcieServerHost,
			Source: "cal D1 (L40S datasheet): 362.05 TFLOPS bf16, 733 fp8, 864 GB/s, PCIe Gen4, " +
				"no NVLink; PyTorch total 47,803,596,800 B = 44.52 GiB (thamada L40S deviceQuery, driver 550); " +
				"nvidia-smi total 46,068 MiB with ECC on, the default (thamada L40S smi; " +
				"akash-network/provider-configs PR 99); fp32 91.6 RECALLED; context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
		{
			Name: "A6000", Memory: 49_140 * catalogMiB, SMIMemory: 49_140 * catalogMiB,
			BF16TFLOPS: 154.8, FP32TFLOPS: 38.7, HBMGBps: 768,
			LinkGBps: 56.25, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: gaRates, Host: desktopDDR4Host,
			Source: "RTX A6000 datasheet (RECALLED, not in cal D1): 309.7 TFLOPS sparse tensor = 154.8 " +
				"dense, 768 GB/s GDDR6, NVLink bridge 112.5 GB/s; nvidia-smi total 49,140 MiB with ECC off " +
				"(RECALLED); PyTorch's total_memory not found in a public source: the nvidia-smi total stands in " +
				"(optimistic by the driver's reserve, 354-762 MiB on the Ampere and Ada cards above and below); " +
				"context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
		{
			Name: "RTX-3090", Memory: 25_327_697_920, SMIMemory: 24_576 * catalogMiB,
			BF16TFLOPS: 71, FP32TFLOPS: 35.6, HBMGBps: 936.2,
			LinkGBps: 56.25, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: gaRates.withSMs(82, "RTX 3090 (GA102): 82 SMs (10,496 CUDA cores at 128 an SM, NVIDIA Ampere GA102 GPU Architecture whitepaper); otherwise as the A6000: no MAMF row, defaults"), Host: desktopDDR4Host,
			Source: "cal D1: 71 TFLOPS with fp32 accumulate, 936.2 GB/s, NVLink bridge 112.5 GB/s " +
				"(RECALLED); PyTorch total 25,327,697,920 B = 23.59 GiB (thamada RTX3090 deviceQuery, driver 560); " +
				"nvidia-smi total 24,576 MiB on recent drivers (thamada RTX3090 smi; noonghunna/club-3090 issues; " +
				"older Linux drivers show 24,268 MiB); context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
		{
			Name: "RTX-4090", Memory: 25_386_352_640, SMIMemory: 24_564 * catalogMiB,
			BF16TFLOPS: 165.2, FP32TFLOPS: 82.6, FP8TFLOPS: 660.6, HBMGBps: 1_008,
			LinkGBps: 0, PCIeGBps: 32, Context: catalogLazyContext,
			Kernels: adaRates.withSMs(128, "RTX 4090 (AD102): 128 SMs (16,384 CUDA cores at 128 an SM, NVIDIA Ada GPU Architecture whitepaper); otherwise as the L40S: no MAMF row, defaults"), Host: desktopDDR5Host,
			Source: "cal D1: 165.2 TFLOPS with fp32 accumulate, fp8 660.6, 1,008 GB/s, PCIe Gen4 only; " +
				"PyTorch total 25,386,352,640 B = 23.64 GiB (thamada RTX4090 deviceQuery, driver 550; the same " +
				"23.64 GiB in the OOM messages of RLinf/RLinf issue 255); nvidia-smi total 24,564 MiB (thamada " +
				"RTX4090 smi); context: 500 MiB, the Ampere/Ada rows of context_oom_test.go",
		},
	}
}

// deviceAliases maps normalized common names to catalog names.
func deviceAliases() map[string]string {
	return map[string]string{
		"v100":         "V100-16GB",
		"v100sxm2":     "V100-16GB",
		"v100sxm216gb": "V100-16GB",
		"v100sxm232gb": "V100-32GB",
		"a100":         "A100-80GB",
		"a100sxm4":     "A100-80GB",
		"a100sxm480gb": "A100-80GB",
		"a100sxm440gb": "A100-40GB",
		"h100":         "H100-80GB",
		"h100sxm":      "H100-80GB",
		"h100sxm5":     "H100-80GB",
		"h100sxm580gb": "H100-80GB",
		"h10080gbhbm3": "H100-80GB",
		"h100nvl94gb":  "H100-NVL",
		"h200sxm":      "H200",
		"h200141gb":    "H200",
		"h200sxm141gb": "H200",
		"mi300":        "MI300X",
		"a6000":        "A6000",
		"rtxa6000":     "A6000",
		"3090":         "RTX-3090",
		"4090":         "RTX-4090",
	}
}

// normalizeDeviceName folds case and drops separators and vendor words, so
// "NVIDIA GeForce RTX 4090", "rtx_4090" and "RTX-4090" compare equal.
func normalizeDeviceName(s string) string {
	s = strings.ToLower(s)
	for _, w := range []string{"nvidia", "geforce", "tesla", "amd", "instinct"} {
		s = strings.ReplaceAll(s, w, "")
	}
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// LookupDevice finds a catalog device by name, case-insensitively and
// ignoring separators ("h100-80gb", "H100 80GB"), or by a common alias
// ("H100" is the 80 GB SXM part, "A100" the 80 GB SXM part). An unknown
// name gives an error listing the close matches.
func LookupDevice(name string) (Device, error) {
	cat := Catalog()
	key := normalizeDeviceName(name)
	if key != "" {
		if canon, ok := deviceAliases()[key]; ok {
			key = normalizeDeviceName(canon)
		}
		for _, d := range cat {
			if normalizeDeviceName(d.Name) == key {
				return d, nil
			}
		}
	}
	if close := closeDeviceNames(key, cat); len(close) > 0 {
		return Device{}, fmt.Errorf("unknown gpu %q (close matches: %s)", name, strings.Join(close, ", "))
	}
	names := make([]string, len(cat))
	for i, d := range cat {
		names[i] = d.Name
	}
	return Device{}, fmt.Errorf("unknown gpu %q (known: %s)", name, strings.Join(names, ", "))
}

// closeDeviceNames returns up to four catalog names near key: those that
// share a prefix with it, or are within an edit distance of a third of
// its length, nearest first.
func closeDeviceNames(key string, cat []Device) []string {
	if key == "" {
		return nil
	}
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := max(2, len(key)/3)
	for _, d := range cat {
		n := normalizeDeviceName(d.Name)
		dist := units.EditDistance(key, n)
		if strings.HasPrefix(n, key) || strings.HasPrefix(key, n) {
			dist = min(dist, 1)
		}
		if dist <= limit {
			cands = append(cands, cand{d.Name, dist})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for i := 0; i < len(cands) && i < 4; i++ {
		out = append(out, cands[i].name)
	}
	return out
}
