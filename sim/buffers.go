package sim

import "github.com/memsh/memsh/sim/units"

// Module buffers: tensors a module registers with register_buffer. They
// move to the device with the model (module.to(device) moves parameters
// and buffers alike), are neither trained nor sharded, and stay for the
// whole run. anemoi's graph models hold their graph this way: each mapper
// its edge indices and fixed edge attributes, the model the coordinates of
// every node set (graph_buffers.go).

// bufferInfo is one module buffer on the device.
type bufferInfo struct {
	name  string
	shape []int64
	dtype units.DType
	why   string
}

// buffer registers a module buffer of the module being lowered.
func (b *builder) buffer(name string, shape []int64, dt units.DType, why string) {
	b.p.buffers = append(b.p.buffers, bufferInfo{name: b.name(name), shape: shape, dtype: dt, why: why})
}

// setupBuffers allocates the model's buffers with its parameters.
func (r *Replay) setupBuffers() {
	for _, bf := range r.p.buffers {
		n := bf.dtype.Bytes(numel(bf.shape))
		r.allocate(Alloc{Tensor: bf.name, Shape: bf.shape, DType: bf.dtype, Bytes: n, Why: bf.why, Cat: CatParams})
		r.rep.States.Buffers += n
	}
}
