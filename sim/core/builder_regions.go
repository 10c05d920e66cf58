package core

// The Builder's checkpoint regions: a region of the plan's policy, the
// regions a layer opens itself, nested ones, and the no-grad state a
// reentrant region records (checkpoint.go says what a region keeps).

// policyRegion starts a region of the plan's checkpoint policy, which
// picks the reentrant or non-reentrant variant (checkpoint.go).
func (b *Builder) PolicyRegion(name string) func() {
	opened := len(b.P.Regions)
	end := b.BeginRegion(name)
	if len(b.P.Regions) == opened {
		return end // a region was open already
	}
	// Megatron's recompute (tensor_parallel.checkpoint, CheckpointFunction)
	// runs the whole forward again in its backward: no early stop
	// (model_flops.go RecomputeEnd).
	b.P.Regions[len(b.P.Regions)-1].WholeRecompute = b.MegatronKernels() || b.Ckpt.NoEarlyStop
	if b.Ckpt.Mode == "op" {
		id := b.region
		return func() {
			end()
			b.keepPolicyOutputs(id)
		}
	}
	if !b.Ckpt.Reentrant {
		return end
	}
	id := b.region
	b.P.Regions[id-1].Reentrant = true
	return func() {
		end()
		b.reentrantNoGrad(id)
	}
}

// reentrantNoGrad marks a reentrant region none of whose inputs requires
// grad: CheckpointFunction ran its forward under no_grad and, with no
// input requiring grad, records no backward node, so nothing made inside
// requires grad (its parameters get no gradient) and nothing is kept.
func (b *Builder) reentrantNoGrad(id int32) {
	reg := &b.P.Regions[id-1]
	for j := reg.First; j < reg.End; j++ {
		for _, v := range b.P.Ops[j].In {
			if pr := b.P.Values[v].Producer; (pr < reg.First || pr >= reg.End) && b.P.Values[v].Grad {
				return
			}
		}
	}
	reg.NoGrad = true
	for j := reg.First; j < reg.End; j++ {
		for _, v := range b.P.Ops[j].Out {
			b.P.Values[v].Grad = false
		}
	}
}

// beginRegion starts a checkpoint region unless one is open; the returned
// func closes it.
func (b *Builder) BeginRegion(name string) func() {
	if b.region != 0 || b.Eval {
		return func() {}
	}
	b.P.Regions = append(b.P.Regions, Region{name: b.Name(name), First: int32(len(b.P.Ops))})
	id := int32(len(b.P.Regions))
	b.region = id
	return func() {
		reg := &b.P.Regions[id-1]
		reg.End = int32(len(b.P.Ops))
		b.region = 0
		if !reg.Reentrant {
			reg.NoGrad = b.recordsNoGraph(reg)
		}
	}
}

// recordsNoGraph reports whether no op of a region made an output that
// requires grad (no input requires it, no trainable parameter inside): a
// non-reentrant region then records no backward node, no saved tensor
// refers to its frame, and the inputs the frame saved
// (frame.save_inputs) are released when the region returns (torch 2.15's
// torch/utils/checkpoint.py: save_inputs, line 1001; the frame is reached
// only from the pack and unpack hooks of tensors saved inside,
// _checkpoint_hook, line 1339).
func (b *Builder) recordsNoGraph(reg *Region) bool {
	for j := reg.First; j < reg.End; j++ {
		for _, v := range b.P.Ops[j].Out {
			if b.P.Values[v].Grad {
				return false
			}
		}
	}
	return true
}

// BeginNestedRegion starts a checkpoint region inside the open one (a
// module wrapped in checkpoint inside a checkpointed module: the outer
// recompute runs it without keeping what it saves, only its inputs, and
// its own backward runs it once more), or a region of its own when none is
// open; the returned func closes it and reopens the enclosing one.
func (b *Builder) BeginNestedRegion(name string) func() {
	if b.Eval {
		return func() {}
	}
	parent := b.region
	b.P.Regions = append(b.P.Regions, Region{name: b.Name(name), First: int32(len(b.P.Ops)), Parent: parent})
	id := int32(len(b.P.Regions))
	b.region = id
	return func() {
		reg := &b.P.Regions[id-1]
		reg.End = int32(len(b.P.Ops))
		b.region = parent
		reg.NoGrad = b.recordsNoGraph(reg)
	}
}

// OffloadRegion marks the open region as run under save_on_cpu inside its
// checkpoint (Region.Offload); nothing without an open region (eval).
func (b *Builder) OffloadRegion() {
	if b.region != 0 {
		b.P.Regions[b.region-1].Offload = true
	}
}
