package replay

import (
	"github.com/memsh/memsh/sim/core"
)

// Megatron's fp32 main parameters and Adam moments, one tensor per
// parameter shard (not one flat tensor): how the caching allocator sees
// them decides what nvidia-smi shows (lazy_states.go).
//
//   - Megatron's DDP lays each buffer out in reverse parameter order
//     (param_and_grad_buffer.py _ParamAndGradBuffer.__init__ at
//     core_v0.12.0: "for param in params[::-1]"); the distributed
//     optimizer gives rank k elements [k*S, (k+1)*S) of it, S = numel/dp,
//     and makes for every parameter that overlaps its range an fp32 main
//     shard: shard_model_param.clone().float() (distrib_optimizer.py
//     _build_model_and_main_param_groups l.366), a 16-bit copy freed once
//     the fp32 one is made. Without the distributed optimizer the shard
//     is the whole parameter (Float16OptimizerWithFloat16Params,
//     optimizer.py: param.detach().clone().float()).
//   - Adam (Transformer Engine's FusedAdam, or apex's) makes exp_avg and
//     exp_avg_sq for each main shard, torch.zeros_like of it
//     (transformer_engine/pytorch/optimizers/fused_adam.py
//     initialize_state).
//   - Megatron's grouped experts (TEGroupedMLP over Transformer Engine's
//     GroupedLinear) hold one weight per local expert (weight0 ...
//     weightN), where memsh's grouped MoE holds one 3-D tensor
//     [experts, out, in]: such a tensor is split into its experts.
//
// The replay shards rank 0's range and makes the shards in parameter
// order (Megatron goes by optimizer parameter group, weight-decayed and
// not; the bytes are the same). Bucket padding is left out, as in the
// buffers' sizes.

// perExpert is how Megatron holds parameter p: pieces tensors of n
// elements each, one per local expert for a grouped expert tensor
// [experts, out, in] (TEGroupedMLP's weight0 ... weightN), else one.
func perExpert(p *core.ParamInfo) (pieces, n int64) {
	if IsExpertRole(p.Role) && len(p.Shape) == 3 && p.Shape[0] > 1 && p.Numel%p.Shape[0] == 0 {
		return p.Shape[0], p.Numel / p.Shape[0]
	}
	return 1, p.Numel
}

// mainShard is one parameter shard of this rank: elements of parameter pi.
type mainShard struct {
	pi int32
	n  int64
}

// megatronShards is rank 0's shards of group g, shard elements in all:
// the group's parameters laid out in reverse order, each grouped expert
// tensor as one tensor per expert.
func megatronShards(p *core.Program, g paramGroup, shard int64) []mainShard {
	var out []mainShard
	left := shard
	for k := len(g.params) - 1; k >= 0 && left > 0; k-- {
		pi := g.params[k]
		pieces, n := perExpert(&p.Params[pi])
		for range pieces {
			if left == 0 {
				break
			}
			take := min(n, left)
			out = append(out, mainShard{pi: pi, n: take})
			left -= take
		}
	}
	// Parameter order, as the optimizer makes them.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// megatronMainParams makes the fp32 main shards (each through its 16-bit
// clone) and then the optimizer's moments of each, or leaves the moments
// for a first step's optimizer.step() to make (Replay.lazy).
func (d *distState) megatronMainParams(r *Replay, shards []mainShard) {
	prec := r.Plan.Precision
	st := &r.Rep.States
	master := prec.HasMaster()
	if master {
		for _, s := range shards {
			name := d.p.Params[s.pi].Name
			tmp := r.allocateParts(Alloc{Tensor: "shard clone", DType: prec.Params, Bytes: prec.Params.Bytes(s.n), Why: "16-bit clone of the parameter shard (clone().float())", Cat: core.CatTemporaries},
				allocParts{tensor: name, sep: " ", dim: s.n})
			b := prec.Master.Bytes(s.n)
			r.allocateParts(Alloc{Tensor: "main param", DType: prec.Master, Bytes: b, Why: "fp32 main parameter shard (distributed optimizer)", Cat: core.CatOptimizer},
				allocParts{tensor: name, sep: " ", dim: s.n})
			r.release(tmp)
			st.Master += b
		}
	}
	for _, s := range shards {
		p := &d.p.Params[s.pi]
		for _, x := range d.muonState(r, s) { // Adam's by shape, a Muon matrix's momentum (muon_megatron.go)
			st.Optimizer += x.Bytes
			a := Alloc{Tensor: x.Name, Shape: []int64{s.n}, DType: prec.States, Bytes: x.Bytes, Why: x.Name, Cat: core.CatOptimizer}
			parts := allocParts{tensor: p.Name, sep: " ", why: "optimizer state ", whyTail: " (distributed-optimizer shard)"}
			if r.lazy { // made by the first step (lazy_states.go)
				r.pending = append(r.pending, parts.join(a))
				continue
			}
			r.allocateParts(a, parts)
		}
	}
}

// The model's own parameter tensors. Megatron builds the model on the GPU
// (megatron/training/training.py get_model at core_v0.12.0: Transformer
// Engine's layers make their weights on the current device), one tensor
// per parameter, and with the distributed optimizer its DDP then makes
// each group's parameter and gradient buffers (torch.zeros) and moves
// every parameter into the parameter buffer: param.data = the buffer's
// view, copy_(old_param_data), del old_param_data
// (param_and_grad_buffer.py _ParamAndGradBuffer.__init__, l.619-655),
// dense parameters first, then the expert ones (distributed_data_parallel
// .py). The model's tensors go back to the caching allocator, which keeps
// their segments for whatever later fits in them.

// remapsParams reports whether the replay makes the model's own
// parameter tensors before the buffers: the distributed optimizer's
// remap, for a training step, with the parameters in the params dtype
// (Transformer Engine's fp8 and MXFP8 primary weights are left as before).
func (d *distState) remapsParams(r *Replay) bool {
	if !d.Par.DistributedOptimizer || r.Plan.Phase == core.Eval {
		return false
	}
	for _, g := range d.groups(true) {
		if g.fp8 > 0 || g.mxfp8 > 0 {
			return false
		}
	}
	return true
}

// modelParams allocates the model's trainable parameter tensors in
// parameter order (a grouped expert tensor as one per expert, as
// megatronShards) and returns them by group.
func (d *distState) modelParams(r *Replay) map[string][]int32 {
	dt := r.Plan.Precision.Params
	out := map[string][]int32{}
	for _, g := range d.groups(true) {
		for _, pi := range g.params {
			p := &d.p.Params[pi]
			pieces, n := perExpert(p)
			for range pieces {
				out[g.name] = append(out[g.name], r.allocateParts(Alloc{Tensor: "", DType: dt, Bytes: dt.Bytes(n), Why: "the parameter as the model made it, before DDP moves it into its buffer", Cat: core.CatParams},
					allocParts{tensor: p.Name, dim: n}))
			}
		}
	}
	return out
}
