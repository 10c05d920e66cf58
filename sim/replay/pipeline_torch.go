package replay

import "github.com/memsh/memsh/sim/core"

// What a stage of torch.distributed.pipelining keeps across its
// micro-batches (core/pipeline_torch.go): its receive buffers, allocated
// before the step and kept; the micro-batches the replay does not run;
// the received activations' gradients until the step ends; and, on the
// last stage, the outputs step() concatenates after the backward.

// setupTorchStage allocates the stage's buffers and the gradient receive
// buffers of its in-flight copies, before the step.
func (d *distState) setupTorchStage(r *Replay) {
	st := d.p.Stage
	if st == nil || (len(st.Buffers) == 0 && len(st.HeldGrads) == 0) {
		return
	}
	defer func(op string) { r.op = op }(r.op)
	r.op = "pipeline receive buffers"
	for _, b := range st.Buffers {
		for range b.Count {
			r.allocate(Alloc{Tensor: b.Name, Shape: b.Shape, DType: b.Dtype, Bytes: b.Bytes, Why: b.Why, Cat: b.Cat})
		}
	}
	d.seedBuf = map[core.Value]int32{}
	for _, o := range st.Outputs {
		if !o.Buffer {
			continue
		}
		vi := &d.p.Values[o.V]
		d.seedBuf[o.V] = r.allocate(Alloc{Tensor: "grad of " + vi.Name, Shape: vi.Shape, DType: vi.Dtype, Bytes: vi.Bytes,
			Why: "gradient receive buffer of an in-flight micro-batch (torch pipelining's grad_recv_info, kept)", Cat: core.CatTemporaries})
	}
	d.heldGrad = map[core.Value]bool{}
	for _, v := range st.HeldGrads {
		d.heldGrad[v] = true
	}
}

// keepsGrad reports whether the gradient of v (allocation id) outlives
// its use: a kept receive buffer, or a received activation's gradient,
// released when the step ends. Every gradient the backward releases asks
// (87,000 times a BenchmarkEvaluateLlama70B3D evaluation): where no map
// holds anything, none is read (three lookups in empty or nil maps were
// 0.4 % of its instructions).
func (d *distState) keepsGrad(v core.Value, id int32) bool {
	if d == nil || len(d.seedBuf)+len(d.heldGrad)+len(d.leakedGrad) == 0 {
		return false
	}
	if _, ok := d.seedBuf[v]; ok {
		return true
	}
	if d.heldGrad[v] {
		d.keptGrads = append(d.keptGrads, id)
		return true
	}
	if d.leakedGrad[v] { // fsdp1_reentrant.go
		d.leakedGrads = append(d.leakedGrads, id)
		return true
	}
	return false
}

// mergeOutputs is step()'s concatenation of the last stage's outputs, at
// the end of the backward: allocated and dropped.
func (d *distState) mergeOutputs(r *Replay) {
	if d == nil || d.p.Stage == nil || d.p.Stage.Merged == nil {
		return
	}
	b := d.p.Stage.Merged
	r.op = "pipeline step(): " + b.Name
	r.release(r.allocate(Alloc{Tensor: b.Name, Shape: b.Shape, DType: b.Dtype, Bytes: b.Bytes, Why: b.Why, Cat: b.Cat}))
}

// releaseKeptGrads frees the received activations' gradients when the
// step ends (the next step's clear_runtime_states).
func (d *distState) releaseKeptGrads(r *Replay) {
	if d == nil {
		return
	}
	for _, id := range d.keptGrads {
		r.release(id)
	}
	d.keptGrads = nil
}
