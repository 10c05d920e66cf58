package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Megatron-LM's Muon (`--optimizer muon`, megatron/core/optimizer/
// __init__.py _get_megatron_emerging_optimizer at d98e8a64dd) is NVIDIA's
// emerging_optimizers (NVIDIA-NeMo/Emerging-Optimizers at fd77292)
// OrthogonalizedOptimizer under Megatron's TensorParallelMuon
// (megatron/core/optimizer/emerging_optimizers.py): its param groups, the
// 2-D matrices that are not the embedding or the output layer
// (_is_muon_excluded, l.140-147: every TEGroupedLinear expert weight is
// one), wrapped in Float16OptimizerWithFloat16Params, so it steps the fp32
// main parameter with the fp32 main gradient; the rest steps with Adam
// (--muon-scalar-optimizer). Its only state is momentum_buffer,
// zeros_like the fp32 main parameter (orthogonalized_optimizer.py
// _init_group). A step, one matrix at a time:
//
//	p.add_(p, alpha=-wd*lr)                        decoupled weight decay, in place
//	buf.lerp_(grad, 1 - momentum)
//	update = grad.lerp(buf, momentum)              fp32, --muon-nesterov only (Megatron's default: off)
//	newton_schulz_tp(update, tp_mode="duplicated") (muon_utils.py)
//	    shards = [empty_like(update)] * tp; all_gather; x = cat(shards)   fp32 whole matrix
//	    X = F.normalize(x); X = X.to(bfloat16)     fp32 matmul precision "medium"
//	    ns_steps times: A = X @ X.mT; B = addmm(A, A, A); X = addmm(X, B, X)
//	    X = X.to(float32); chunk: this rank's shard
//	orth * scale * extra_scale                     two fp32 shard-sized products
//	p.add_(orth, alpha=-lr)
//
// Every Transformer Engine linear's weight has a partition_dim whatever the
// TP size (transformer_engine.py l.122), so the gather and its cat run at
// tp 1 too; Megatron's router weight (a torch Parameter) has none and
// goes straight to newton_schulz. With --muon-tp-mode blockwise each rank
// orthogonalizes its own shard, no gather. Under --use-distributed-
// optimizer (or dist_muon) Megatron runs the LayerWiseDistributedOptimizer
// (core/muon_layerwise.go).
//
// tools/oracle/muon_megatron_step.py measures the live tensors on the CPU
// (TestMuonEmergingStepAsMeasured): at the peak, the gathered shards and
// their cat beside either F.normalize's fp32 output and its bf16 copy, or
// an iteration's iterate, Gram, Gram update and next iterate; 14 bytes an
// element of the whole matrix, or 12 and 4 k^2 where that is more.

// MuonEmerging is NS's value for emerging_optimizers' form, Megatron-LM's.
const MuonEmerging = "emerging"

// MuonBlockwise is MuonTP's value for --muon-tp-mode blockwise.
const MuonBlockwise = "blockwise"

// Muon is the optimizer p runs, its Newton-Schulz form resolved: under
// Megatron-LM's runtime Muon is emerging_optimizers'.
func (p *Plan) Muon() Optimizer {
	o := p.Optimizer
	if o.Kind == Muon && p.Precision.Megatron && o.NS == "" {
		o.NS = MuonEmerging
	}
	return o
}

// MuonMatrixShape is the matrix one piece of p is orthogonalized as: p's
// own shape, or under emerging_optimizers' form an expert's [out, in] of
// a grouped expert tensor [experts, out, in] (Megatron's TEGroupedMLP
// holds one weight per expert).
func (o Optimizer) MuonMatrixShape(p *ParamInfo) []int64 {
	if o.NS == MuonEmerging && len(p.Shape) == 3 && isExpertRole(p.Role) {
		return p.Shape[1:]
	}
	return p.Shape
}

func isExpertRole(r Role) bool { return len(r) > 7 && r[:7] == "expert_" }

// MuonGathered is the matrix emerging_optimizers' newton_schulz_tp
// orthogonalizes for a local matrix of shape s of p, tp the degree of
// p's tensor-parallel group (MuonTPRanks): the whole matrix, tp shards
// all-gathered along partition_dim, in the duplicated mode for a weight
// with a partition_dim, s itself otherwise; and whether the shards are
// gathered and concatenated (at tp 1 too).
func (o Optimizer) MuonGathered(p *ParamInfo, s []int64, tp int64) (whole []int64, gathered bool) {
	if p.Role == RoleRouter || o.MuonTP == MuonBlockwise { // no partition_dim; blockwise drops it
		return s, false
	}
	full := []int64{s[0], s[1]}
	if tp > 1 && p.FullNumel > p.Numel { // a TP-sharded weight
		if rowParallel(p.Role) {
			full[1] *= tp
		} else {
			full[0] *= tp
		}
	}
	return full, true
}

// MuonTPRanks is the degree of the tensor-parallel group p's shards are
// gathered over: the experts' (expert_tp) for an expert's weight, tp
// otherwise.
func (p *Plan) MuonTPRanks(pi *ParamInfo) int64 {
	par := p.Parallel.Norm()
	if isExpertRole(pi.Role) && par.ETP > 0 {
		return par.ETP
	}
	return OrOne(par.TP)
}

// rowParallel reports whether a weight of role r is sharded along its
// input dimension under tensor parallelism (RowParallelLinear, partition
// dim 1): the attention's output and the MLP's down projections.
func rowParallel(r Role) bool {
	return r == RoleO || r == RoleDown || r == "expert_down"
}

// MuonPieceTemporaries are the tensors alive at the peak of stepping one
// matrix of local shape s of p (a MuonPiece's) in emerging_optimizers'
// form (this file's comment; the measured rows in muon_megatron_test.go).
func (o Optimizer) MuonPieceTemporaries(p *ParamInfo, s []int64, tp int64) []MuonTemporary {
	whole, gathered := o.MuonGathered(p, s, tp)
	k, n := muonDims(whole)
	var out []MuonTemporary
	if o.Nesterov {
		out = append(out, MuonTemporary{"update", s, units.FP32})
	}
	shards := []MuonTemporary{}
	if gathered {
		shards = append(shards, MuonTemporary{"gathered shards", whole, units.FP32}, MuonTemporary{"cat", whole, units.FP32})
	}
	iterate := append(shards[:len(shards):len(shards)],
		MuonTemporary{"X", []int64{k, n}, units.BF16}, MuonTemporary{"A", []int64{k, k}, units.BF16},
		MuonTemporary{"B", []int64{k, k}, units.BF16}, MuonTemporary{"X next", []int64{k, n}, units.BF16})
	normalize := append(shards[:len(shards):len(shards)],
		MuonTemporary{"normalized", []int64{k, n}, units.FP32}, MuonTemporary{"X", []int64{k, n}, units.BF16})
	scale := []MuonTemporary{{"orthogonalized", whole, units.FP32}, {"orth * scale", s, units.FP32}, {"orth * scale * extra", s, units.FP32}}
	best := iterate
	for _, c := range [][]MuonTemporary{normalize, scale} {
		if temporariesBytes(c) > temporariesBytes(best) {
			best = c
		}
	}
	return append(out, best...)
}

func temporariesBytes(ts []MuonTemporary) int64 {
	var b int64
	for _, t := range ts {
		b += t.DType.Bytes(Numel(t.Shape))
	}
	return b
}

// MuonEmergingGEMMs are one Newton-Schulz iteration's products of a local
// matrix s of p under emerging_optimizers' form: the whole matrix's in the
// duplicated mode (every TP rank runs them all).
func (o Optimizer) MuonEmergingGEMMs(p *ParamInfo, s []int64, tp int64) [3][3]int64 {
	whole, _ := o.MuonGathered(p, s, tp)
	return MuonGEMMs(whole)
}

// MuonGatherBytes is the fp32 bytes a rank receives gathering the TP
// shards of a local matrix s of p (duplicated mode), 0 when none.
func (o Optimizer) MuonGatherBytes(p *ParamInfo, s []int64, tp int64) int64 {
	whole, gathered := o.MuonGathered(p, s, tp)
	if !gathered || Numel(whole) == Numel(s) {
		return 0
	}
	return units.FP32.Bytes(Numel(whole) - Numel(s))
}

// validateMuonMegatron checks Muon's settings under Megatron-LM.
func (p *Plan) validateMuonMegatron() error {
	o := p.Optimizer
	if o.Kind != Muon { // Optimizer.Validate refuses its settings on another optimizer
		return nil
	}
	switch o.MuonTP {
	case "", MuonBlockwise:
	case "distributed":
		return &units.Error{Path: "train", Msg: `muon(tp_mode="distributed"): Newton-Schulz distributed over the TP ranks (a Gram all-reduce an iteration) is not modelled`,
			Hint: `tp_mode="duplicated" (Megatron's default) or "blockwise"`}
	default:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("muon(tp_mode=%q) is not a mode memsh knows", o.MuonTP),
			Hint: `"duplicated" (--muon-tp-mode's default) or "blockwise"`}
	}
	if !p.Precision.Megatron {
		switch {
		case o.NS == MuonEmerging:
			return &units.Error{Path: "train", Msg: `muon(newton_schulz="emerging") is Megatron-LM's (emerging_optimizers steps fp32 main parameters)`,
				Hint: `precision="megatron", or newton_schulz="torch"`}
		case o.MuonTP != "":
			return &units.Error{Path: "train", Msg: "muon(tp_mode=...) is Megatron-LM's --muon-tp-mode", Hint: `precision="megatron", or drop tp_mode`}
		}
		return nil
	}
	if o.NS == MuonReference {
		return &units.Error{Path: "train", Msg: `muon(newton_schulz="reference") under precision="megatron": Megatron-LM runs emerging_optimizers' Newton-Schulz`,
			Hint: `newton_schulz="emerging" (or leave it out)`}
	}
	return nil
}
