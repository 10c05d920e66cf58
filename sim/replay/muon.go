package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// muonStepTemporaries replays the transient peak of Muon's step
// (core/muon.go): torch.optim.Muon steps its matrices one at a time, so
// the step's peak is its largest matrix's, at the last addmm of a
// Newton-Schulz iteration (the Nesterov update, the bf16 iterate, its
// Gram matrix, the Gram update and the next iterate alive at once);
// each tensor is its own block of the caching allocator. AdamW's step of
// the other parameters follows it (stepTemporaries).
func (r *Replay) muonStepTemporaries() {
	o, prec := r.Plan.Muon(), r.Plan.Precision
	if o.NS == core.MuonEmerging { // Megatron's, by matrix (muon_megatron.go)
		r.muonEmergingStep()
		return
	}
	largest, bytes := -1, int64(0)
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if !r.stepped(pi) || !o.MuonMatrix(p) {
			continue
		}
		var b int64
		for _, t := range o.MuonStepTemporaries(p, p.GradDType(prec)) {
			b += t.DType.Bytes(core.Numel(t.Shape))
		}
		if b > bytes {
			largest, bytes = pi, b
		}
	}
	if largest < 0 {
		return
	}
	p := &r.P.Params[largest]
	temps := o.MuonStepTemporaries(p, p.GradDType(prec))
	ids := make([]int32, 0, len(temps))
	for _, t := range temps {
		ids = append(ids, r.allocate(Alloc{Tensor: p.Name + " muon " + t.Name, Shape: t.Shape, DType: t.DType,
			Bytes: t.DType.Bytes(core.Numel(t.Shape)), Why: "Muon's Newton-Schulz step of the largest matrix (torch.optim.Muon steps one matrix at a time)",
			Cat: core.CatTemporaries}))
	}
	for _, id := range ids {
		r.release(id)
	}
}

// MuonTraffic is the HBM bytes of Muon's elementwise ops on matrix p
// (torch/optim/_muon.py, _single_tensor_muon): buf.lerp_(grad) reads the
// buffer and the gradient and writes the buffer; the Nesterov update
// grad.lerp(buf) reads both and writes a gradient-sized tensor; its bf16
// copy reads it and writes 2 bytes an element; the norm reads the copy
// and div_ reads and writes it; the update of the stepped weight (the
// master where there is one) reads and writes it twice (mul_ for the
// weight decay, add_ of the iterate, which it reads). With a master the
// model's weight is written from it. The Newton-Schulz products are
// priced as GEMMs (timing).
func (r *Replay) MuonTraffic(p *core.ParamInfo) int64 {
	prec := r.Plan.Precision
	n := p.Numel
	g, s := p.GradDType(prec).Bytes(n), p.StateDType(prec).Bytes(n)
	w := p.Stored(prec).Bytes(n)
	stepped, copyBack := w, int64(0)
	if prec.Master != units.InvalidDType && p.DType == units.InvalidDType {
		stepped, copyBack = prec.Master.Bytes(n), prec.Master.Bytes(n)+w
	}
	bf16 := 2 * n
	t, update := 2*s+g, s // buf.lerp_; without Nesterov the update is the buffer
	if r.Plan.Optimizer.Nesterov {
		t, update = t+2*g+s, g // grad.lerp(buf)
	}
	t += update + bf16    // .to(bfloat16, copy=True)
	t += 3 * bf16         // norm, div_
	t += 4*stepped + bf16 // mul_, add_
	return t + copyBack
}
