package hw

import "strings"

// Device describes one accelerator model. Memory is what PyTorch sees as
// the device's total (torch.cuda.get_device_properties().total_memory),
// which its OOM message calls "total capacity" and which a step must fit
// in; SMIMemory is the larger total nvidia-smi shows, the driver's own
// reserve included.
type Device struct {
	Name       string
	Memory     int64   // bytes PyTorch sees (total_memory)
	SMIMemory  int64   // bytes nvidia-smi (rocm-smi) shows as memory.total; 0: unknown, as Memory
	BF16TFLOPS float64 // dense bf16/fp16 tensor-core peak, TFLOP/s
	FP32TFLOPS float64 // fp32 (non-tensor-core) peak, TFLOP/s
	FP8TFLOPS  float64 // dense fp8 peak, 0 if unsupported
	HBMGBps    float64 // device memory bandwidth, GB/s (1e9)
	LinkGBps   float64 // GPU-GPU link (NVLink/xGMI) per direction, GB/s; 0 when PCIe only
	PCIeGBps   float64 // host link per direction, GB/s
	Context    int64   // CUDA context + loaded kernels with lazy module loading, bytes (not counted by PyTorch's allocator)
	// EagerContext is the context measured with eager module loading
	// (CUDA_MODULE_LOADING=EAGER, or CUDA before 11.7) where the card has
	// such a measurement; 0: Context plus EagerModuleBytes (context.go).
	EagerContext int64
	// CurrentContext is the lazy-loading context measured on this card
	// with the newest stack memsh knows (torch 2.11, CUDA 13.0), which
	// runtime "cuda" takes (core.Runtime.CurrentStack); 0 where not
	// measured, and for the older runtimes Context holds (context.go).
	CurrentContext int64
	// CurrentEagerContext is CurrentContext's eager-loading counterpart
	// (CUDA_MODULE_LOADING=EAGER with the newest stack); 0 where not
	// measured.
	CurrentEagerContext int64
	Source              string // where these figures come from

	// Host is the host memory of the node the card is usually installed
	// in (host.go); zero for a custom device, whose node then takes
	// DefaultHostGBps.
	Host HostMemory

	// LinkAssumed and PCIeAssumed say that a custom device was given no
	// link_gbps or pcie_gbps and a documented default stands in (reports
	// say so when it shapes the result).
	LinkAssumed, PCIeAssumed bool

	// Kernels is what its kernels reach (kernels.go); zero for a custom
	// device, which then takes DefaultKernelRates.
	Kernels KernelRates
}

// SMITotal is the total nvidia-smi shows: SMIMemory, or Memory when the
// device does not say (a custom gpu()).
func (d Device) SMITotal() int64 {
	if d.SMIMemory > 0 {
		return d.SMIMemory
	}
	return d.Memory
}

// HasBF16 says whether the card computes in bf16: Volta (V100) does not;
// the catalog's V100 entries hold the fp16 tensor peak in BF16TFLOPS.
func (d Device) HasBF16() bool { return !strings.HasPrefix(d.Name, "V100") }
