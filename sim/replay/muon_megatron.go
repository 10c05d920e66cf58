package replay

import (
	"github.com/memsh/memsh/sim/core"
)

// Megatron-LM's Muon (core/muon_megatron.go): each Muon matrix's fp32 main
// parameter and its momentum_buffer, zeros_like the main parameter (no
// Adam moments); without the distributed optimizer every rank holds them
// all (Float16OptimizerWithFloat16Params, unsharded), with it the
// layer-wise optimizer's rank holds the matrices it owns, whole, and the
// other parameters' Adam state is the distributed optimizer's byte-level
// shard (core/muon_layerwise.go). The step orthogonalizes one matrix at a
// time: its peak is the largest stepped matrix's (muonMegatronStep).

// muonState is the state of shard s under Megatron: a Muon matrix's
// momentum_buffer in the main parameter's dtype, else the optimizer's
// states by shape (its Adam's).
func (d *distState) muonState(r *Replay, s mainShard) []core.StateTensor {
	prec := r.Plan.Precision
	o := r.Plan.Muon()
	if o.MuonMatrix(&d.p.Params[s.pi]) {
		dt := prec.Master
		if !prec.HasMaster() {
			dt = prec.Params
		}
		return []core.StateTensor{{Name: "momentum_buffer", Bytes: dt.Bytes(s.n)}}
	}
	return o.States([]int64{s.n}, s.n, prec.States)
}

// layerWiseShards is rank 0's shards of group g under the layer-wise
// optimizer: the distributed optimizer's byte-level shard of the
// parameters that are not Muon's, then the Muon matrices shard 0 owns,
// each whole.
func (d *distState) layerWiseShards(r *Replay, g paramGroup) []mainShard {
	o := r.Plan.Muon()
	rest := paramGroup{name: g.name, n: g.n}
	for _, pi := range g.params {
		if !o.MuonMatrix(&d.p.Params[pi]) {
			rest.params = append(rest.params, pi)
			rest.numel += d.p.Params[pi].Numel
		}
	}
	var out []mainShard
	if rest.numel > 0 {
		out = megatronShards(d.p, rest, ceilDiv(rest.numel, rest.n))
	}
	for _, pc := range d.ownedPieces(r, g) {
		out = append(out, mainShard{pi: pc.Param, n: core.Numel(pc.Shape)})
	}
	return out
}

// ownedPieces are the Muon matrices of group g this rank steps: all of
// them, or under the layer-wise optimizer those shard 0 owns.
func (d *distState) ownedPieces(r *Replay, g paramGroup) []core.MuonPiece {
	pieces := r.Plan.Muon().MuonPieces(d.p.Params, g.params)
	if !r.Plan.LayerWise() {
		return pieces
	}
	shard := core.LayerWiseShards(pieces, g.n)
	out := pieces[:0:0]
	for i, pc := range pieces {
		if shard[i] == 0 {
			out = append(out, pc)
		}
	}
	return out
}

// MuonSteppedPieces are the Muon matrices this rank steps: every one
// on one GPU or under data parallel, its own under the layer-wise
// optimizer.
func (r *Replay) MuonSteppedPieces() []core.MuonPiece {
	o := r.Plan.Muon()
	if o.Kind != core.Muon {
		return nil
	}
	d := r.Dist
	if d == nil || d.Mode != DistMegatron {
		var all []int32
		for pi := range r.P.Params {
			if r.stepped(pi) {
				all = append(all, int32(pi))
			}
		}
		return o.MuonPieces(r.P.Params, all)
	}
	var out []core.MuonPiece
	for _, g := range d.groups(true) {
		out = append(out, d.ownedPieces(r, g)...)
	}
	return out
}

// muonEmergingStep replays the transient peak of Megatron's Muon step:
// the largest stepped matrix's Newton-Schulz tensors (core.Optimizer.
// MuonPieceTemporaries); Adam's step of the rest is Transformer Engine's
// fused one, in place.
func (r *Replay) muonEmergingStep() {
	o := r.Plan.Muon()
	var best []core.MuonTemporary
	var bestB int64
	name := ""
	for _, pc := range r.MuonSteppedPieces() {
		p := &r.P.Params[pc.Param]
		temps := o.MuonPieceTemporaries(p, pc.Shape, r.Plan.MuonTPRanks(p))
		var b int64
		for _, t := range temps {
			b += t.DType.Bytes(core.Numel(t.Shape))
		}
		if b > bestB {
			best, bestB, name = temps, b, p.Name
		}
	}
	ids := make([]int32, 0, len(best))
	for _, t := range best {
		ids = append(ids, r.allocate(Alloc{Tensor: name + " muon " + t.Name, Shape: t.Shape, DType: t.DType,
			Bytes: t.DType.Bytes(core.Numel(t.Shape)), Why: "Muon's Newton-Schulz step of the largest matrix (emerging_optimizers, one matrix at a time)",
			Cat: core.CatTemporaries}))
	}
	for _, id := range ids {
		r.release(id)
	}
}

// MuonEmergingTraffic is the HBM bytes of the elementwise ops of Megatron's
// Muon step of a local matrix of shape s of p (core/muon_megatron.go's
// statements, fp32 main parameter, gradient and momentum): the weight
// decay's add_ reads the parameter twice and writes it, lerp_ reads the
// buffer and gradient and writes the buffer, the Nesterov lerp reads both
// and writes the update; the gather writes the whole matrix and its cat
// reads and writes it; the norm reads it, the division reads and writes
// it, the bf16 copy reads it and writes 2 bytes, the fp32 copy after the
// iterations reads 2 and writes 4; the two scalings read and write the
// shard; add_ reads the parameter and the update and writes the
// parameter; Float16OptimizerWithFloat16Params copies the main parameter
// into the model's.
func (r *Replay) MuonEmergingTraffic(p *core.ParamInfo, s []int64) int64 {
	o := r.Plan.Muon()
	n := core.Numel(s)
	w := r.Plan.Precision.Params.Bytes(n)
	t := 12*n + 12*n // weight decay; lerp_
	if o.Nesterov {
		t += 12 * n
	}
	wholeShape, gathered := o.MuonGathered(p, s, r.Plan.MuonTPRanks(p))
	whole := core.Numel(wholeShape)
	if gathered {
		t += 4*whole + 8*whole // the gathered shards, their cat
	}
	t += 4*whole + 8*whole + 6*whole // norm, division, bf16 copy
	t += 6 * whole                   // fp32 copy
	t += 16 * n                      // two scalings
	t += 12 * n                      // add_
	return t + 4*n + w               // main to model parameter
}
