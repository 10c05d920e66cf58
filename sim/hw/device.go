package hw

// Device describes one accelerator model. Memory is what the driver reports
// as total memory (torch.cuda.get_device_properties().total_memory), which
// is what PyTorch's OOM message calls "total capacity".
type Device struct {
	Name       string
	Memory     int64   // bytes, as the driver reports
	BF16TFLOPS float64 // dense bf16/fp16 tensor-core peak, TFLOP/s
	FP32TFLOPS float64 // fp32 (non-tensor-core) peak, TFLOP/s
	FP8TFLOPS  float64 // dense fp8 peak, 0 if unsupported
	HBMGBps    float64 // device memory bandwidth, GB/s (1e9)
	LinkGBps   float64 // GPU-GPU link (NVLink/xGMI) per direction, GB/s; 0 when PCIe only
	PCIeGBps   float64 // host link per direction, GB/s
	Context    int64   // CUDA context + loaded kernels, bytes (not counted by PyTorch's allocator)
	Source     string  // where these figures come from
}
