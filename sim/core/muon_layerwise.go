package core

import (
	"cmp"
	"slices"
	"strings"
)

// Megatron-LM's Muon under --use-distributed-optimizer (or the deprecated
// `--optimizer dist_muon`): megatron/training/arguments.py (d98e8a64dd,
// l.1725-1736) turns the distributed optimizer off and the layer-wise one
// on for every emerging optimizer, and wrap_model_chunks_with_ddp
// (training.py l.2262) turns DDP's use_distributed_optimizer back on with
// the LayerWiseDistributedOptimizer's param layout
// (megatron/core/optimizer/layer_wise_optimizer.py): the Muon matrices in
// buffers of their own whose every bucket is cut into dp shards that hold
// whole matrices, so that a rank owns whole matrices, makes the fp32 main
// parameter and momentum of those alone and runs their Newton-Schulz
// (Float16OptimizerWithFloat16Params wraps each base optimizer after
// shard_params); the gradients are reduce-scattered and the parameters
// all-gathered through DDP's buffers as the distributed optimizer's are.
// The other parameters (embeddings, norms, biases) go through a real
// DistributedOptimizer (__init__.py l.916-947, byte-level shards).
//
// _compute_per_buffer_param_layout places the matrices of a bucket by
// Newton-Schulz cost (big * small^2), largest first, each on the shard of
// least accumulated cost among those whose elements stay under
// 1.3 x the bucket's elements / dp (else the shard of fewest elements).
// memsh places a group's matrices as one bucket (LayerWiseShards): the
// buckets' cut (bucket_size, 40 M elements or 1 M x dp by default) and
// the shards' padding are left out, as Megatron's own buffer padding is.
//
// With --no-use-layer-wise-param-layout (the legacy "ping-pong" path)
// every parameter, Adam's too, is owned whole by one rank, assigned in
// order of size, and the updated parameters are all-gathered by
// flattening: not modelled (the Megatron reader refuses it).

// LayerWise reports whether p runs Megatron-LM's layer-wise distributed
// optimizer: Muon under Megatron's runtime with the distributed optimizer.
func (p *Plan) LayerWise() bool {
	return p.Optimizer.Kind == Muon && p.Precision.Megatron && p.Parallel.DistributedOptimizer && p.Phase != Eval
}

// MuonPiece is one matrix Muon orthogonalizes: parameter Param's piece
// (one expert's of a grouped expert tensor), of Shape.
type MuonPiece struct {
	Param int32
	Shape []int64
}

// MuonPieces are the matrices Muon steps among params, in parameter
// order. Under emerging_optimizers' form (Megatron-LM's) a gated MLP's
// gate and up projections, which Megatron holds as one linear_fc1 weight
// [2 x ffn, hidden] (TELayerNormColumnParallelLinear; TEGroupedMLP's
// weightK of each expert likewise), are one matrix: memsh lowers them as
// two (nn.MLP), so the gate's piece takes its up's rows (mergeFC1).
func (o Optimizer) MuonPieces(ps []ParamInfo, params []int32) []MuonPiece {
	var out []MuonPiece
	merged := map[int32]bool{}
	for k, pi := range params {
		p := &ps[pi]
		if merged[pi] || !o.MuonMatrix(p) {
			continue
		}
		s := o.MuonMatrixShape(p)
		if up := o.mergeFC1(ps, params[k+1:], p); up >= 0 {
			merged[up] = true
			s = []int64{2 * s[0], s[1]}
		}
		n := int64(1)
		if len(p.Shape) == 3 {
			n = p.Shape[0]
		}
		for range n {
			out = append(out, MuonPiece{Param: pi, Shape: s})
		}
	}
	return out
}

// mergeFC1 is the up projection among the parameters after gate that
// Megatron fuses with it into linear_fc1 under emerging_optimizers' form:
// the first of the next two (a bias between) of the up role, the same
// shape and module, or -1.
func (o Optimizer) mergeFC1(ps []ParamInfo, after []int32, gate *ParamInfo) int32 {
	if o.NS != MuonEmerging || (gate.Role != RoleGate && gate.Role != "expert_gate") {
		return -1
	}
	want := RoleUp
	if gate.Role != RoleGate {
		want = "expert_up"
	}
	for _, pi := range after[:min(2, len(after))] {
		q := &ps[pi]
		if q.Role == want && slices.Equal(q.Shape, gate.Shape) && parentModule(q.Name) == parentModule(gate.Name) {
			return pi
		}
	}
	return -1
}

// parentModule is a parameter name less its last two parts: the module
// holding the projection ("layers.0.mlp" of "layers.0.mlp.gate_proj.weight").
func parentModule(name string) string {
	for range 2 {
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			return ""
		}
		name = name[:i]
	}
	return name
}

// LayerWiseShards assigns each piece to one of dp shards as
// _compute_per_buffer_param_layout's _emit_bucket does (muon_layerwise.go's
// comment): by Newton-Schulz cost, largest first, to the shard of least
// accumulated cost that keeps its elements under 1.3 x numel / dp, else to
// the shard of fewest elements. Ties go to the lower shard (Python's min).
func LayerWiseShards(pieces []MuonPiece, dp int64) []int64 {
	out := make([]int64, len(pieces))
	if dp <= 1 {
		return out
	}
	cost := func(s []int64) int64 { k, n := muonDims(s); return n * k * k }
	order := make([]int, len(pieces))
	var total int64
	for i := range pieces {
		order[i] = i
		total += Numel(pieces[i].Shape)
	}
	// Python's sorted is stable: equal costs keep the pieces' order.
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(cost(pieces[b].Shape), cost(pieces[a].Shape))
	})
	capN := float64(total) / float64(dp) * 1.3
	load, numel := make([]int64, dp), make([]int64, dp)
	for _, i := range order {
		n := Numel(pieces[i].Shape)
		best := int64(-1)
		for s := range dp {
			if float64(numel[s]+n) <= capN && (best < 0 || load[s] < load[best]) {
				best = s
			}
		}
		if best < 0 {
			best = 0
			for s := range dp {
				if numel[s] < numel[best] {
					best = s
				}
			}
		}
		out[i] = best
		load[best] += cost(pieces[i].Shape)
		numel[best] += n
	}
	return out
}
