package timing

import "github.com/memsh/memsh/sim/core"

// Megatron-Core's asynchronous tensor-parallel communication in the
// backward of a column-parallel linear
// (LinearWithGradAccumulationAndAsyncCommunication.backward,
// megatron/core/tensor_parallel/layers.py at core_v0.13.0, ll. 486-598):
//
//   - with sequence parallelism the saved, sequence-sharded input is
//     all-gathered again with async_op=True and the input-gradient
//     (dgrad) GEMM grad_output.matmul(weight) runs meanwhile (ll. 506-522);
//   - the input gradient is then all-reduced (without SP, ll. 534-537) or
//     reduce-scattered along the sequence (with SP, ll. 539-549) with
//     async_op=True, and the weight-gradient (wgrad) GEMM runs meanwhile;
//     the handle is waited for after it (ll. 588-598).
//
// Both rely on CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron requires
// with tensor parallelism (ll. 700-716), so that the collective is queued
// ahead of the GEMM and the two run at once. Transformer Engine's
// Linear and LayerNormLinear do the same in their backward
// (transformer_engine/pytorch/module/ at v2.3: linear.py ll. 555-558,
// the saved input's all-gather with async_op=True before the dgrad GEMM
// (l. 597); ll. 620-626, the dgrad's reduce-scatter or all-reduce with
// async_op=True before the wgrad GEMM (l. 681), waited for at l. 729;
// layernorm_linear.py ll. 640, 700-703, 758, 807). A collective that
// outlasts its GEMM is exposed by the difference: exposed =
// max(0, collective - GEMM). Row-parallel linears' collectives (the
// forward's all-reduce or reduce-scatter and, with SP, the backward's
// all-gather of the output gradient) sit between the GEMMs that need
// them and stay exposed; so do the forward's collectives, unless
// Transformer Engine's userbuffers overlap them (below).
//
// The path arrived in Megatron-LM on 2021-08-30 (commit cf7efd4f5a,
// "allreduce overlap with wgrad gemm", megatron/mpu/layers.py); runs
// of older releases set parallel(async_tp_comm=False). It is Megatron's:
// plans of precision "megatron" overlap (the Megatron-Core path,
// core.Builder.MegatronKernels); other runtimes (DTensor's, DeepSpeed's)
// expose the collectives whole.

// Transformer Engine's userbuffers (Megatron's --tp-comm-overlap,
// parallel(tp_comm_overlap=True)) overlap the rest with sequence
// parallelism: the forward's all-gather before a column-parallel linear
// and reduce-scatter after a row-parallel one, and the backward's
// all-gather of a row-parallel linear's output gradient, each split in
// tp chunks exchanged between ring neighbours while the GEMM runs on the
// chunk already there (transformer_engine/pytorch/module/base.py
// initialize_ub: qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad take
// the ring-exchange "split all-gather", proj_fprop and fc2_fprop a split
// reduce-scatter; Megatron-Bridge's userbuffers_fp8_h100_h8192_tp4_*
// configs, training/comm_overlap.py, use ring exchange for all six). The
// column-parallel backward's bulk overlaps (qkv/fc1 dgrad and wgrad) are
// the asynchronous ones above. memsh exposes each such collective by the
// same rule, max(0, collective - GEMM), with the GEMM the forward GEMM
// of the linears it feeds or follows (the dgrad GEMM for the backward's
// all-gather); the chunking's start-up and the SMs the copies hold are
// not priced. Megatron requires sequence parallelism for it.

// asyncTP reports whether plan p runs Megatron-Core's asynchronous
// tensor-parallel backward communication.
func asyncTP(p *core.Plan) bool {
	par := p.Parallel
	return p.Precision.Megatron && par.TP > 1 && par.TPRuntime != "torch" && !par.SyncTPComm
}

// ubTP reports whether plan p overlaps its sequence-parallel collectives
// with Transformer Engine's userbuffers (parallel(tp_comm_overlap=True)).
func ubTP(p *core.Plan) bool {
	par := p.Parallel
	return p.Precision.Megatron && par.TP > 1 && par.SequenceParallel && par.TPCommOverlap && par.TPRuntime != "torch"
}

// SumCommOf is SumComm over a priced program's collectives: each
// collective that runs beside a GEMM (core.CommRecord.Beside) carries
// that GEMM's time, its Hide, when the plan overlaps it: the backward
// ones a column-parallel linear launches under Megatron's asynchronous
// backward (asyncTP), the userbuffers ones (CommRecord.UB) under
// tp_comm_overlap (ubTP). costs are PriceOps(prog, plan).
func SumCommOf(prog *core.Program, plan *core.Plan, costs []OpCost) []CommSum {
	var s commScratch
	return s.sumCommOf(prog, plan, costs)
}

// SumCommOf is SumCommOf (the function) worked out in s's lists, which
// the next program's sums reuse: the same sums, in a list of their own
// exactly as long (the search prices tens of thousands of small
// programs, and the lists regrown for each were a fifth of its
// profiles' pricing bytes).
func (s *Prices) SumCommOf(prog *core.Program, plan *core.Plan, costs []OpCost) []CommSum {
	return s.comm.sumCommOf(prog, plan, costs)
}

// commScratch is SumCommOf's lists: the sums as they are merged, and
// besideGEMMs' times by op.
type commScratch struct {
	sums                []CommSum
	fprop, dgrad, wgrad []float64
	marked              []bool
}

// sumCommOf is SumCommOf in s's lists; the result is a list of its own
// (nil when there is no collective).
func (s *commScratch) sumCommOf(prog *core.Program, plan *core.Plan, costs []OpCost) []CommSum {
	sums := s.sums[:0]
	async, ub := asyncTP(plan), ubTP(plan)
	if !(async || ub) || len(costs) != len(prog.Ops) {
		sums = SumComm(prog.Comm, sums, 1)
	} else {
		fprop, dgrad, wgrad := s.besideGEMMs(prog, costs)
		for _, c := range prog.Comm {
			var hide float64
			if op := c.Beside - 1; op >= 0 && int(op) < len(prog.Ops) {
				switch {
				case c.UB && !ub:
				case c.UB && c.Fprop:
					hide = fprop[op]
				case c.UB:
					hide = dgrad[op]
				case !async || !c.Backward:
				case c.Dgrad:
					hide = dgrad[op]
				default:
					hide = wgrad[op]
				}
			}
			sums = addComm(sums, CommSum{Kind: c.Kind, Group: c.Group, Bytes: c.Bytes, Backward: c.Backward, Hide: hide}, 1)
		}
		SortComm(sums)
	}
	s.sums = sums[:0]
	if len(sums) == 0 {
		return nil
	}
	return append([]CommSum(nil), sums...)
}

// besideGEMMs is, for each op a collective can run beside, the forward,
// dgrad and wgrad GEMM time it runs beside: a matmul's own; for a
// sequence-parallel all-gather (or the op producing a fused linear's
// input), the sum over the matmuls reading its output (directly, or
// through the one cast or fp8 quantization between them). The lists,
// by op, are s's (0 for any other op).
func (s *commScratch) besideGEMMs(prog *core.Program, costs []OpCost) (fprop, dgrad, wgrad []float64) {
	n := len(prog.Ops)
	s.fprop, s.dgrad, s.wgrad, s.marked = resize(s.fprop, n), resize(s.dgrad, n), resize(s.wgrad, n), resize(s.marked, n)
	fprop, dgrad, wgrad, marked := s.fprop, s.dgrad, s.wgrad, s.marked
	clear(fprop)
	clear(dgrad)
	clear(wgrad)
	clear(marked)
	for _, c := range prog.Comm {
		if c.Beside > 0 && int(c.Beside) <= n {
			marked[c.Beside-1] = true
		}
	}
	isMatmul := func(i int32) bool {
		k := prog.Ops[i].Kind
		return k == "matmul" || k == "int8_matmul"
	}
	producer := func(v core.Value) int32 { return prog.Values[v].Producer }
	for i := range prog.Ops {
		op := int32(i)
		if !isMatmul(op) {
			continue
		}
		if marked[op] {
			fprop[op] += costs[i].Fwd
			dgrad[op] += costs[i].Dgrad
			wgrad[op] += costs[i].Wgrad
		}
		for _, v := range prog.Ops[i].In {
			src := producer(v)
			if src >= 0 && !marked[src] && !isMatmul(src) && len(prog.Ops[src].In) > 0 {
				src = producer(prog.Ops[src].In[0]) // through a cast or quantization
			}
			if src >= 0 && src != op && marked[src] && !isMatmul(src) {
				fprop[src] += costs[i].Fwd
				dgrad[src] += costs[i].Dgrad
				wgrad[src] += costs[i].Wgrad
				break
			}
		}
	}
	return fprop, dgrad, wgrad
}
