package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The expert roles: what quantization, LoRA targets and freeze= select.
const (
	RoleExpertGate core.Role = "expert_gate"
	RoleExpertUp   core.Role = "expert_up"
	RoleExpertDown core.Role = "expert_down"
)

// lowerLoop is the per-expert loop of transformers' MoE blocks, on one
// rank (MixtralSparseMoeBlock.forward in transformers 4.x; DeepseekV3MoE.moe
// and GptOssExperts.forward run the same loop):
//
//	final = zeros(T, d)                                # alive through the loop
//	mask = one_hot(selected, E).permute(2, 1, 0)       # int64 [E, k, T]
//	for e in experts:
//	    idx, top_x = torch.where(mask[e])              # int64 [n_e] each
//	    cur = hidden[top_x]                            # saves top_x
//	    y = expert_e(cur) * routing_weights[top_x, idx, None]   # the mul saves both
//	    final.index_add_(0, top_x, y)                  # saves top_x and y
//
// Each expert's tokens are a new [n_e, d] copy; its MLP saves what its
// linears save (a frozen nn.Linear keeps nothing; bitsandbytes' MatMul4Bit
// keeps its input). Backward of each index select makes a zero-filled
// gradient of the whole input before accumulating it (IndexBackward0:
// index_put_ into zeros of the input's shape).
func (m *MoE) lowerLoop(b *core.Builder, x core.Value, r routing) core.Value {
	done := b.Scope("experts")
	b.ReserveParams(m.Experts) // one tensor (or one pass of the loop) per expert at least
	done()
	rows, err := m.loads(r.tokens, 1)
	if err != nil {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: err.Error(), Hint: units.HintTensor}})
	}
	T, E, k := r.tokens, m.Experts, m.TopK
	classes := E
	if m.SentinelsEP { // one_hot(top_k_index, num_classes=self.num_experts + 1), transformers 5.18 and later
		classes++
	}
	oh := b.AddOp("one_hot", "expert_mask", []core.Value{r.idx})
	mask := b.Out(oh, "expert_mask", []int64{classes, k, T}, units.INT64, "one_hot expert mask (int64), alive through the expert loop")
	b.Op(oh).NoGradB = true
	b.Op(oh).Syncs = 1 // expert_hit = torch.greater(expert_mask.sum(...), 0).nonzero(): nonzero's count
	accDT := core.Promote(b.Dtype(x), b.Dtype(r.weights))
	if m.WeightsFP32 { // transformers 5's loop: zeros_like(hidden_states), each output cast to it
		accDT = b.Dtype(x)
	}
	z := b.AddOp("zeros", "final_hidden_states", nil)
	acc := b.Out(z, "final_hidden_states", b.Shape(x), accDT, "the block's output, index_add_-ed expert by expert")
	done = b.Scope("experts")
	var fw *fusedWeights
	if m.impl() != MoELoop {
		w := m.registerFused(b)
		fw = &w
	}
	grad := false
	for e, n := range rows {
		if n == 0 {
			m.idleExpert(b, int64(e), fw) // no tokens: no compute, the weights are there
			continue
		}
		first := len(b.P.Ops)
		grad = m.loopExpert(b, int64(e), n, x, r, mask, acc, fw) || grad
		m.passAten(b, first)
	}
	done()
	b.Val(acc).Grad = grad && !b.Eval
	return b.Cast(acc, b.Dtype(x), "the block's output in the hidden states' dtype")
}

// loopExpert lowers one pass of the loop for expert e with n tokens and
// reports whether its output requires grad.
func (m *MoE) loopExpert(b *core.Builder, e, n int64, x core.Value, r routing, mask, acc core.Value, fw *fusedWeights) bool {
	// nn.Linear experts run in their own modules (experts.<e>); the loop
	// over 3-D weights (fused_loop: transformers 5's "eager"
	// experts_implementation) runs in the experts module itself, as
	// DbrxExperts runs its loop (DbrxExpertGLU each expert's MLP:
	// expertFfn)
	if fw == nil {
		defer b.Scope(core.Itoa(e))()
	}
	w := b.AddOp("where", "where", []core.Value{mask})
	topx := b.Out(w, "top_x", []int64{n}, units.INT64, "token indices routed to this expert")
	slot := b.Out(w, "idx", []int64{n}, units.INT64, "top-k slot of each of those tokens")
	b.Op(w).NoGradB = true
	b.Op(w).Syncs = m.passSyncs()
	sel := b.AddOp("index", "current_state", []core.Value{x, topx})
	cur := b.Out(sel, "current_state", []int64{n, m.Dim}, b.Dtype(x), "this expert's tokens (hidden_states[top_x], a copy)")
	b.Save(sel, topx)
	b.Op(sel).WorkB = b.Val(x).Bytes // zeros of the input's shape, index_put_, accumulated
	y := m.expertFfn(b, e, cur, fw)
	ri := b.AddOp("index", "routing_weight", []core.Value{r.weights, topx, slot})
	rw := b.Out(ri, "routing_weight", []int64{n, 1}, b.Dtype(r.weights), "this expert's routing weights")
	b.Save(ri, topx, slot)
	b.Op(ri).WorkB = b.Val(r.weights).Bytes
	wy := b.Cast(b.Mul("weighted", y, rw), b.Dtype(acc), "weighted expert output in the accumulator's dtype")
	ia := b.AddOp("index_add", "index_add", []core.Value{acc, wy, topx})
	// index_add_ writes into final_hidden_states: the op's output stands
	// for the in-place update and holds no storage of its own.
	upd := b.Out(ia, "index_add", []int64{1}, b.Dtype(acc), "in-place index_add_ into final_hidden_states (no storage)")
	b.Val(upd).Bytes = 0
	// IndexAddBackward0 keeps the source (its formula reads
	// source.dim() and expand_as(source)) and the index.
	b.Save(ia, wy, topx)
	b.Op(ia).Bytes = 2 * float64(b.Val(wy).Bytes)
	return b.Grad(wy)
}

// passAten sets the aten ops one pass of transformers 5.17's eager
// experts loop (MoEFusedLoop) dispatches on the host, on the pass's
// first op (its ops from first on; core.OpInfo.AtenF): 80 in the forward
// and 100 in the backward, counted by torch.profiler on a CPU run of the
// same transformers code (tools/oracle/cuda_loop_host.py --device cpu,
// docs/time.md). Measured on one H200 (sim/testdata/cuda_h200/
// hf_profile.jsonl), the loop's step has 54,308 aten ops and the same
// model with grouped_mm experts 6,904: 185 a pass more over 256 passes,
// against these 180 (TestHFH200LoopAtenOps). Two CPU runs that differ only
// in the expert count (2 layers, batch 2 x 64, every expert hit;
// `cuda_loop_host.py --device cpu --parts loop --experts 16` and `32`,
// torch 2.15, transformers 5.17) difference out the rest of the step:
// (5,527 - 3,169) / 32 = 73.7 forward and (7,101 - 4,137) / 32 = 92.6
// backward aten ops a pass, 166 in all, 8 % under these 180: on the CPU a
// 0-dim index and .item() need no device-to-host copy, so it is a lower
// bound; the H200 run of the same differencing (tools/oracle/cuda_run20.sh)
// will settle it. transformers 4.x's loop is not counted: its ops keep the
// per-kernel dispatch rule.
func (m *MoE) passAten(b *core.Builder, first int) {
	if m.impl() != MoEFusedLoop || first >= len(b.P.Ops) {
		return
	}
	ops := b.P.Ops[first:]
	ops[0].AtenF, ops[0].AtenB = loopPassAtenF, loopPassAtenB
	for i := 1; i < len(ops); i++ {
		ops[i].HostGrouped = true
	}
}

// The aten ops of one pass of transformers 5.17's eager experts loop
// (passAten).
const (
	loopPassAtenF = 80
	loopPassAtenB = 100
)

// passSyncs is the host syncs of one pass of the loop before its
// expert's MLP, where a device value is read on the host (a 0-dim CUDA
// tensor used as an index is applied as select(index.item()): PyTorch's
// python_variable_indexing.cpp, applySlicing; torch.where(x) with one
// argument is nonzero(x), which copies its count to the host):
//
//   - transformers 5.17's eager experts (MoEFusedLoop:
//     Qwen3MoeExperts.forward, MixtralExperts.forward and the families'
//     copies of it, experts_implementation="eager"): for expert_idx in
//     expert_hit: expert_idx = expert_idx[0] (0-dim);
//     "if expert_idx == self.num_experts:" (its truth value, .item()),
//     "torch.where(expert_mask[expert_idx])" (the index, then nonzero),
//     and later the expert's weights, "self.gate_up_proj[expert_idx]"
//     and "self.down_proj[expert_idx]" (fusedSyncs, on those GEMMs):
//     3 here, 5 a pass;
//   - transformers 4.x's nn.Linear experts (MoELoop:
//     MixtralSparseMoeBlock.forward / Qwen3MoeSparseMoeBlock.forward as
//     read at huggingface/transformers 16b6c53): "expert_layer =
//     self.experts[expert_idx]" (nn.ModuleList's index: operator.index of
//     the one-element tensor, .item()) and "torch.where(expert_mask[
//     expert_idx].squeeze(0))" (nonzero): 2 a pass.
//
// Each layer's "expert_hit = ....nonzero()" is one more, on the one_hot
// op. Measured on one H200 (sim/testdata/cuda_h200/hf_profile.jsonl,
// qwen3_moe_loop, 8 layers of 32 experts, all hit): 1,279
// cudaStreamSynchronize in the step, all of them in the forward; these
// rules count 5 x 256 + 8 = 1,288.
func (m *MoE) passSyncs() int32 {
	if m.impl() == MoEFusedLoop && !m.GLUParams { // DbrxExperts has no sentinel check: its 3 are on the weights (moe_dbrx.go)
		return 3
	}
	return 2
}

// fusedSyncs is the host sync of indexing a 3-D expert weight with the
// 0-dim CUDA tensor expert_idx (passSyncs).
const fusedSyncs = 1

// expertFfn is expert e's MLP over its rows x: nn.Linear projections for
// the "loop" impl (quantized and adapted like any linear), slices of the
// 3-D expert parameters otherwise. With tensor parallelism each rank
// holds hidden/tp of every expert (Megatron's expert tensor parallelism).
func (m *MoE) expertFfn(b *core.Builder, e int64, x core.Value, fw *fusedWeights) core.Value {
	gateName, upName, downName := m.projNames()
	tp := b.Par.Etpn()
	hidden := m.Hidden / tp
	bias := m.ExpertBias
	gateUpRead := false // gate_up_proj[expert_idx] is read once for gate and up (one GEMM, chunked)
	lin := func(name string, role core.Role, x core.Value, in, out int64, split bool) core.Value {
		if fw != nil {
			var y core.Value
			switch {
			case split && fw.up >= 0 && role == RoleExpertUp: // DBRX's v1, a tensor of its own
				y = m.fusedSlice(b, e, name, x, in, out, fw.up, -1, core.NoValue)
			case split:
				y = m.fusedSlice(b, e, name, x, in, out, fw.gateUp, fw.gateUpBias, fw.merged(fw.gateUp))
				if gateUpRead {
					return y
				}
				gateUpRead = true
			default:
				y = m.fusedSlice(b, e, name, x, in, out, fw.down, fw.downBias, fw.merged(fw.down))
			}
			b.Op(b.Val(y).Producer).Syncs = fusedSyncs
			return y
		}
		first := int32(len(b.P.Params))
		y := b.Linear(name, role, x, in, out, bias)
		for pi := first; pi < int32(len(b.P.Params)); pi++ {
			if p := &b.P.Params[pi]; p.Role == role && (split || len(p.Shape) == 2) {
				p.FullNumel = p.Numel * tp // [hidden/tp, in], [out, hidden/tp]; down's bias is replicated
			}
		}
		return y
	}
	if !m.expertMLP().gated() {
		h := lin(upName, RoleExpertUp, x, m.Dim, hidden, true)
		h = Activation(b, m.Act, h)
		return lin(downName, RoleExpertDown, h, hidden, m.Dim, false)
	}
	fn := "silu"
	if m.Act == "geglu" {
		fn = "gelu"
	}
	if m.GLUParams {
		defer b.Scope("mlp")()
	}
	gate := lin(gateName, RoleExpertGate, x, m.Dim, hidden, true)
	up := lin(upName, RoleExpertUp, x, m.Dim, hidden, true)
	h := m.gatedAct(b, fn, gate, up)
	return lin(downName, RoleExpertDown, h, hidden, m.Dim, false)
}

// idleExpert registers the weights of an expert no token was routed to
// (nn.Linear experts; fused weights are registered once for all).
func (m *MoE) idleExpert(b *core.Builder, e int64, fw *fusedWeights) {
	if fw != nil {
		return
	}
	defer b.Scope(core.Itoa(e))()
	gate, up, down := m.projNames()
	hidden := m.Hidden / b.Par.Etpn()
	if gate != "" {
		b.IdleLinear(gate, RoleExpertGate, m.Dim, hidden, m.ExpertBias)
	}
	b.IdleLinear(up, RoleExpertUp, m.Dim, hidden, m.ExpertBias)
	b.IdleLinear(down, RoleExpertDown, hidden, m.Dim, m.ExpertBias)
}
