package replay

import "github.com/memsh/memsh/sim/core"

// Module buffers: tensors a module registers with register_buffer. They
// move to the device with the model (module.to(device) moves parameters
// and buffers alike), are neither trained nor sharded, and stay for the
// whole run. anemoi's graph models hold their graph this way: each mapper
// its edge indices and fixed edge attributes, the model the coordinates of
// every node set (graph/buffers.go).

// setupBuffers allocates the model's buffers with its parameters.
func (r *Replay) setupBuffers() {
	for _, bf := range r.P.Buffers {
		n := bf.Dtype.Bytes(core.Numel(bf.Shape))
		r.allocate(Alloc{Tensor: bf.Name, Shape: bf.Shape, DType: bf.Dtype, Bytes: n, Why: bf.Why, Cat: core.CatParams})
		r.Rep.States.Buffers += n
	}
}
