package replay

import "github.com/memsh/memsh/sim/core"

// Module buffers: tensors a module registers with register_buffer. They
// move to the device with the model (module.to(device) moves parameters
// and buffers alike), are neither trained nor sharded, and stay for the
// whole run. anemoi's graph models hold their graph this way: each mapper
// its edge indices and fixed edge attributes, the model the coordinates of
// every node set (graph/buffers.go).

// setupBuffers allocates the model's buffers with its parameters. FSDP1
// moves each with the unit whose module holds it (fsdp1_wrap.go).
func (r *Replay) setupBuffers() {
	if r.Dist != nil && r.Dist.Mode == DistFSDP && r.Dist.fsdp1 {
		return
	}
	for bi := range r.P.Buffers {
		r.setupBuffer(bi)
	}
}

// setupBuffer allocates buffer bi and returns its tensor and bytes.
func (r *Replay) setupBuffer(bi int) (int32, int64) {
	bf := &r.P.Buffers[bi]
	n := bf.Dtype.Bytes(core.Numel(bf.Shape))
	r.Rep.States.Buffers += n
	return r.allocate(Alloc{Tensor: bf.Name, Shape: bf.Shape, DType: bf.Dtype, Bytes: n, Why: bf.Why, Cat: core.CatParams}), n
}
