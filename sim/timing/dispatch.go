package timing

import (
	"github.com/memsh/memsh/sim/core"
)

// Fixed costs: launching kernels from the CPU.
//
// PyTorch launches kernels asynchronously: the CPU runs ahead of the GPU
// and the GPU waits only when the CPU falls behind. A phase of the step
// (forward, backward with its recompute, optimizer step) therefore takes
// the larger of its kernels' GPU time and its CPU dispatch time; what the
// CPU adds beyond the GPU's time is "launch" time, charged to the modules
// whose ops cost more to dispatch than to run.
//
// CPU dispatch per kernel, by dispatch mode (core.Overheads):
//
//   - eager and fused: an op called from Python passes the Python
//     binding, the autograd layer, the ATen dispatcher and the driver's
//     launch, "~5-25 µs of CPU-side work per op" (J. Lin, "From PyTorch op
//     to kernel launch", GPU kernel serving lesson 18, the per-layer table);
//     10 µs is taken per forward kernel. The backward runs in the C++
//     autograd engine without the Python layers (~2 µs of the table's
//     sum): 6 µs per backward kernel.
//   - compiled: Inductor's generated wrapper launches each kernel without
//     the dispatcher, ~3 µs (assumption: the table's driver launch and
//     wrapper call).
//   - cuda_graphs: a captured graph launches all its kernels in one call
//     (NVIDIA, "Getting Started with CUDA Graphs"): no CPU cost per kernel.
//
// These are the time model's assumptions, named in its notes; the
// calibration rows of small models on one GPU (sim/calib_step_test.go)
// are where they show.
const (
	eagerFwdCPU    = 10e-6
	eagerBwdCPU    = 6e-6
	compiledCPU    = 3e-6
	cudaGraphsCPU  = 0
	graphLaunchCPU = 10e-6 // one cudaGraphLaunch per phase
)

// Dispatch is how a plan's kernels are launched (core.Overheads.Dispatch).
type Dispatch uint8

// The dispatch modes.
const (
	DispatchEager Dispatch = iota
	DispatchFused
	DispatchCompiled
	DispatchCUDAGraphs
)

var dispatchNames = [...]string{"eager", "fused", "compiled", "cuda_graphs"}

func (d Dispatch) String() string { return dispatchNames[d] }

// DispatchOf is the plan's dispatch mode: as set, or "fused" for
// Megatron-LM's precision (Transformer Engine's fused kernels),
// "compiled" for a plan with train(compile=...) and "eager" otherwise.
func DispatchOf(p *core.Plan) Dispatch {
	for i, n := range dispatchNames {
		if p.Overheads.Dispatch == n {
			return Dispatch(i)
		}
	}
	if p.Precision.Megatron {
		return DispatchFused
	}
	if p.Compile.CUDAGraphs() { // compile_mode="reduce-overhead": the graphs replayed
		return DispatchCUDAGraphs
	}
	if p.Compile.On() { // train(compile=...): Inductor's kernels
		return DispatchCompiled
	}
	return DispatchEager
}

// compiles reports whether a compiler writes the kernels (Inductor, and
// the CUDA graphs of its reduce-overhead mode).
func (d Dispatch) compiles() bool { return d == DispatchCompiled || d == DispatchCUDAGraphs }

// fuses reports whether elementwise chains run as one kernel.
func (d Dispatch) fuses() bool { return d != DispatchEager }

// cpuPerKernel is the CPU dispatch time of one forward and one backward
// kernel.
func (d Dispatch) cpuPerKernel() (fwd, bwd float64) {
	switch d {
	case DispatchCompiled:
		return compiledCPU, compiledCPU
	case DispatchCUDAGraphs:
		return cudaGraphsCPU, cudaGraphsCPU
	}
	return eagerFwdCPU, eagerBwdCPU
}

// addDispatch sets c's CPU dispatch time from its kernels.
func (pr *pricer) addDispatch(c *OpCost) {
	f, b := pr.dispatch.cpuPerKernel()
	c.FwdCPU = c.FwdK * f
	c.BwdCPU = c.BwdK * b
}
