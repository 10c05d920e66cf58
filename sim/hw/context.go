package hw

// The CUDA context: what a process holds on its device outside PyTorch's
// allocator before NCCL or any library allocates: the driver's per-context
// state and the kernels loaded so far.
//
// Since CUDA 11.7, CUDA_MODULE_LOADING=LAZY loads a module's kernels when
// one is first launched, and PyTorch sets it from 1.13 on when the user
// has not (pytorch/pytorch#86509); before, every kernel of every library
// was loaded at start: "Before CUDA 11.7, *all* kernels were loaded into
// the context once the library was loaded, which took >1000MB" (ptrblck
// in pytorch/pytorch#107667; "around 400MB if CUDA >= 11.7 is used and
// lazy module loading enabled" in #109888).
//
// The catalog's lazy figures come from PyTorch's own out-of-memory
// messages (torch 2.1 and later): "Including non-PyTorch memory, this
// process has Z memory in use. Of the allocated memory A is allocated by
// PyTorch, and B is reserved by PyTorch but unallocated" gives what the
// process holds outside the allocator as Z - A - B (Z is NVML's figure
// for the process, pytorch/pytorch#99699). context_oom_test.go holds the
// messages, one row per public thread, by GPU generation.

// EagerModuleBytes is what eager module loading adds to the context:
// pytorch/pytorch#86509 measured `torch.randn(20, 16, 50, 100).cuda()`
// with cudaMemGetInfo, 666,632,192 B used with CUDA_MODULE_LOADING=DEFAULT
// (eager) and 287,047,680 B with LAZY.
const EagerModuleBytes int64 = 666_632_192 - 287_047_680

// ContextBytes is the CUDA context of device d with lazy module loading,
// or with eager loading when eager is set: the card's measured eager
// context (EagerContext) where it has one, else the lazy context plus
// EagerModuleBytes. current asks for the newest stack's (torch 2.11,
// CUDA 13.0), the card's CurrentContext (CurrentEagerContext with eager
// loading) where it has one: the context
// grows with the CUDA and driver release (issue 28), and the OOM messages
// Context is read from are torch 2.1 to 2.9 on CUDA 11.8 to 12.8.
func (d Device) ContextBytes(eager, current bool) int64 {
	b, _ := d.ContextFigure(eager, current)
	return b
}

// A ContextBasis says which of the catalog's figures ContextFigure took.
type ContextBasis int

const (
	// ContextLazy is Context: lazy loading, read from the OOM messages.
	ContextLazy ContextBasis = iota
	// ContextCurrentLazy is CurrentContext: lazy loading, newest stack.
	ContextCurrentLazy
	// ContextCurrentEager is CurrentEagerContext: eager loading, newest stack.
	ContextCurrentEager
	// ContextMeasuredEager is EagerContext: eager loading, measured.
	ContextMeasuredEager
	// ContextAddedEager is Context plus EagerModuleBytes.
	ContextAddedEager
)

// MeasuredEager reports whether an eager figure was measured rather than
// added to the lazy one.
func (b ContextBasis) MeasuredEager() bool {
	return b == ContextCurrentEager || b == ContextMeasuredEager
}

// Current reports whether the figure is the newest stack's.
func (b ContextBasis) Current() bool {
	return b == ContextCurrentLazy || b == ContextCurrentEager
}

// ContextFigure is ContextBytes with the figure it took.
func (d Device) ContextFigure(eager, current bool) (int64, ContextBasis) {
	switch {
	case !eager && current && d.CurrentContext > 0:
		return d.CurrentContext, ContextCurrentLazy
	case eager && current && d.CurrentEagerContext > 0:
		return d.CurrentEagerContext, ContextCurrentEager
	case !eager:
		return d.Context, ContextLazy
	case d.EagerContext > 0:
		return d.EagerContext, ContextMeasuredEager
	}
	return d.Context + EagerModuleBytes, ContextAddedEager
}

// WithContext is d with a context of b bytes for every runtime and module
// loading: gpu(context=N), and a test's toy card sized against a given
// context. The measured eager context of the older stacks (the V100's)
// stays, as gpu(context=) leaves it.
func (d Device) WithContext(b int64) Device {
	d.Context, d.CurrentContext, d.CurrentEagerContext = b, 0, 0
	return d
}
