package core

import "github.com/memsh/memsh/sim/units"

// Tensor parallelism as Megatron-LM lowers it (Shoeybi et al. 2019,
// arXiv:1909.08053; megatron/core/tensor_parallel/layers.py and
// mappings.py), with sequence parallelism (Korthikanti et al. 2022,
// arXiv:2205.05198):
//
//   - column-parallel linears (q, k, v, gate, up, fc1, lm_head) hold
//     [out/tp, in] and produce [.., out/tp]; their bias is split too;
//   - row-parallel linears (o, down, fc2) hold [out, in/tp] and produce
//     partial sums that are all-reduced (or, with SP, reduce-scattered
//     along the sequence); their bias is replicated;
//   - the embedding is vocabulary-parallel (rows/tp, masked lookup,
//     all-reduce or reduce-scatter), cross-entropy vocabulary-parallel
//     (logits [T, V/tp]);
//   - norms are replicated; without SP the activations between the
//     parallel regions (norms, dropout, residual) stay full [b, s, h] on
//     every rank; with SP they are [b, s/tp, h], all-gathered before the
//     column-parallel linears (the linear keeps the sharded input for its
//     backward and gathers it again there:
//     LinearWithGradAccumulationAndAsyncCommunication) and reduce-scattered
//     after the row-parallel ones.
//
// parallel(tp_runtime="torch") is DTensor's tensor parallelism as
// torchtitan applies it (torch.distributed.tensor.parallel, PyTorch 2.x
// style.py): ColwiseParallel's _prepare_input_fn (and PrepareModuleInput
// before attention and the MLP) redistributes the sequence-sharded input
// to Replicate, an all-gather whose output is the matmul's input, so
// autograd saves the gathered input for the weight gradient and the
// backward gathers nothing again. The linears reading one module input
// share its gathered tensor. Everything else lowers as Megatron's.

// parLowering is the distributed part of the lowering context. The zero
// value is one GPU.
type parLowering struct {
	Tp, cp, ep int64
	sp         bool // sequence parallelism (tp > 1)
	megatronCE bool // Megatron's vocabulary-parallel cross-entropy
	fusedCE    bool // under --cross-entropy-loss-fusion (MegatronFusedCE)
	teCE       bool // under --cross-entropy-fusion-impl te (TEParallelCE)
	torchCE    bool // torch's loss_parallel() over vocabulary-sharded logits (loss_parallel.go)
	torchTP    bool // DTensor's ColwiseParallel: a column-parallel linear saves its gathered input
	asyncTP    bool // torch's micro-pipeline TP (async_tp.go)
	ulysses    bool // context parallelism by all-to-all over heads (DeepSpeed Ulysses)
	allGather  bool // torch's context_parallel(), its keys and values all-gathered (ring_attention.go)

	etp         int64   // the experts' tensor-parallel degree (expert.go)
	expertLoad  float64 // the busiest rank's routed rows, in balanced shares
	expertWorst bool    // dropless routing's worst case

	// UnpermuteProbs: Megatron-Core 0.12's grouped experts weight their
	// outputs in the unpermute (Parallelism.UnpermuteProbs).
	UnpermuteProbs bool
	// NoPermuteFusion: Megatron's dispatcher without
	// --moe-permute-fusion (Parallelism.NoPermuteFusion); it applies on
	// one GPU too.
	NoPermuteFusion bool
	// SharedExpertOverlap: Megatron's overlapped shared expert
	// (Parallelism.SharedExpertOverlap).
	SharedExpertOverlap bool
	// RouterDType: Megatron's --moe-router-dtype (Parallelism.RouterDType),
	// invalid when unset; it applies on one GPU too.
	RouterDType units.DType
	// keepGathered: the column-parallel linears being lowered read an
	// all-gather made outside them and keep it for the weight gradient
	// (KeepGatheredInputs).
	keepGathered bool
	// sideStream: the ops being lowered run on a side stream
	// (OnSideStream).
	sideStream bool
}

// Ulysses reports whether context parallelism runs DeepSpeed Ulysses
// (sim/nn/ulysses.go) rather than ring attention.
func (l parLowering) Ulysses() bool { return l.ulysses && l.cp > 1 }

// AllGatherCP reports whether context parallelism runs torch's
// context_parallel() with its all-gather rotater (sim/nn/ring_attention.go).
func (l parLowering) AllGatherCP() bool { return l.allGather && l.cp > 1 }

func (l parLowering) Tpn() int64 { return max(l.Tp, 1) }
func (l parLowering) Cpn() int64 { return max(l.cp, 1) }
func (l parLowering) Epn() int64 { return max(l.ep, 1) }

// spDiv is the factor by which sequence parallelism shards tokens.
func (l parLowering) spDiv() int64 {
	if l.sp {
		return l.Tp
	}
	return 1
}

// configure sets the distributed lowering of plan p on b.
func (p *Plan) configureLowering(b *Builder) {
	b.Par.RouterDType = p.Parallel.RouterDType
	b.Par.NoPermuteFusion = p.Parallel.NoPermuteFusion
	if !p.Parallel.Active() {
		return
	}
	par := p.Parallel.Norm()
	b.Par = parLowering{Tp: par.TP, cp: par.CP, ep: par.EP, sp: par.SequenceParallel, ulysses: par.CPMode == "ulysses", allGather: par.CPMode == "allgather",
		etp: par.ETPn(), expertLoad: par.ExpertLoad, expertWorst: par.ExpertWorst,
		UnpermuteProbs: par.UnpermuteProbs, NoPermuteFusion: par.NoPermuteFusion, SharedExpertOverlap: par.SharedExpertOverlap, RouterDType: par.RouterDType,
		// Megatron's GPT loss is always the vocab-parallel cross-entropy; the
		// "megatron" precision stands for Megatron-LM's recipe.
		megatronCE: par.TP > 1 || p.Precision.Megatron,
		torchCE:    par.TP > 1 && par.LossParallel == "torch",
		torchTP:    par.TP > 1 && par.TPRuntime == "torch",
		asyncTP:    par.AsyncTP && par.TP > 1}
	b.Par.megatronCE = b.Par.megatronCE && !b.Par.torchCE
	b.Par.fusedCE = b.Par.megatronCE && par.LossParallel == MegatronFusedCE
	b.Par.teCE = b.Par.megatronCE && par.LossParallel == TEParallelCE
	if p.Model.Points == 0 { // a graph model shards inside its layers (sim/graph/shard.go)
		b.Seq /= par.CP
	} else if p.Model.ShardedPoints { // tensor_split's first (largest) share (sim/graph/shard_edges.go)
		b.Seq = (b.Seq + par.CP - 1) / par.CP
	}
	if par.FSDP {
		// FSDP's MixedPrecisionPolicy(param_dtype=...) all-gathers the
		// parameters in param_dtype (by default the autocast dtype): the
		// layers see those weights, and with param_dtype=bf16 autocast has
		// nothing to cast or cache. Without autocast FSDP casts the
		// forward inputs to param_dtype too (cast_forward_inputs).
		b.Prec.Params = par.FSDPParams(p.Precision)
		if !b.Prec.Autocast {
			b.Prec.Compute = b.Prec.Params
		}
	}
}

// recordComm notes one collective of the micro-batch (comm.go).
func (b *Builder) RecordComm(kind, group string, bytes int64, backward bool) {
	if b.Eval && backward {
		return
	}
	b.P.Comm = append(b.P.Comm, CommRecord{Kind: kind, Group: group, Bytes: bytes, Backward: backward})
}

// RecordCommBeside notes one backward collective of the micro-batch that
// Megatron-Core launches beside op's input-gradient (dgrad) or
// weight-gradient GEMM (CommRecord.Beside).
func (b *Builder) RecordCommBeside(kind, group string, bytes int64, op int32, dgrad bool) {
	if b.Eval {
		return
	}
	b.P.Comm = append(b.P.Comm, CommRecord{Kind: kind, Group: group, Bytes: bytes, Backward: true, Beside: op + 1, Dgrad: dgrad})
}

// recordInputComm notes the backward collective on the input xg of the
// column-parallel linear op: the sequence-parallel re-gather of the saved
// input (beside the dgrad GEMM) or the all-reduce of the input gradient
// (beside the wgrad GEMM).
//
// Megatron-Core fuses the column-parallel linears that read one input:
// q, k and v are one linear_qkv (SelfAttention, megatron/core/
// transformer/attention.py at core_v0.13.0: "linear_qkv" builds one
// ColumnParallelLinear of width (heads + 2 x groups) x head_dim), gate and
// up one linear_fc1 of width 2 x ffn_hidden_size (transformer/mlp.py,
// gated_linear_unit); ms-swift and Megatron-Bridge convert a Hugging Face
// checkpoint's q_proj/k_proj/v_proj and gate_proj/up_proj into them. The
// fused linear's backward runs its input's collective once, beside its one
// GEMM (tensor_parallel/layers.py, LinearWithGradAccumulationAndAsync-
// Communication.backward). Under precision "megatron" memsh lowers the
// linears apart (names and saved tensors as the checkpoint has them) and
// records that collective once per input, beside the op producing the
// input: the time model sums the GEMMs of its readers (sim/timing/
// tp_overlap.go, besideGEMMs), the fused GEMM. Elsewhere (DTensor's
// tensor parallelism, or an input a matmul produces) each linear records
// its own.
func (b *Builder) recordInputComm(kind string, xg Value, bytes int64, op int32, dgrad bool) {
	src := b.Val(xg).Producer
	if !b.MegatronKernels() || b.Par.torchTP || src < 0 || b.Op(src).Kind == "matmul" || b.Op(src).Kind == "int8_matmul" {
		b.RecordCommBeside(kind, "tp", bytes, op, dgrad)
		return
	}
	key := fusedInput{xg, kind}
	if b.fusedInputs[key] {
		return
	}
	if b.fusedInputs == nil {
		b.fusedInputs = map[fusedInput]bool{}
	}
	b.fusedInputs[key] = true
	b.RecordCommBeside(kind, "tp", bytes, src, dgrad)
}

// fusedInput is a column-parallel input whose backward collective of
// kind Megatron's fused linear runs once (recordInputComm).
type fusedInput struct {
	x    Value
	kind string
}

// RecordCommUB notes a tensor-parallel collective that Transformer
// Engine's userbuffers (parallel(tp_comm_overlap=True)) runs in chunks
// beside op's GEMMs: a forward collective beside the forward GEMMs of op
// (a row-parallel matmul) or of op's readers (a sequence-parallel
// all-gather); a backward one beside op's input-gradient GEMM. Whether it
// overlaps is the time model's to decide (sim/timing/tp_overlap.go).
func (b *Builder) RecordCommUB(kind string, bytes int64, op int32, backward bool) {
	if b.Eval && backward {
		return
	}
	b.P.Comm = append(b.P.Comm, CommRecord{Kind: kind, Group: "tp", Bytes: bytes, Backward: backward,
		Beside: op + 1, Dgrad: backward, UB: true, Fprop: !backward})
}

// shardParam records the unsharded size of parameter pi.
func (b *Builder) ShardParam(pi int32, full int64) { b.P.Params[pi].FullNumel = full }

// KeepGatheredInputs makes the column-parallel linears lowered until the
// returned function is called keep their gathered input for the weight
// gradient, as linears without their own tensor-parallel communication
// over an all-gather made before them do (Megatron's overlapped shared
// expert: nn/moe.go lowerShared); the backward gathers nothing again.
func (b *Builder) KeepGatheredInputs() (restore func()) {
	prev := b.Par.keepGathered
	b.Par.keepGathered = true
	return func() { b.Par.keepGathered = prev }
}

// OnSideStream makes the ops added until the returned function is called
// run on a side stream of their own (OpInfo.SideStream): Megatron's
// overlapped shared expert, issued under torch.cuda.stream(self.stream).
func (b *Builder) OnSideStream() (restore func()) {
	prev := b.Par.sideStream
	b.Par.sideStream = true
	return func() { b.Par.sideStream = prev }
}

// tpGather all-gathers a sequence-parallel input along the sequence
// (gather_from_sequence_parallel_region); x itself without SP.
func (b *Builder) TpGather(x Value) Value {
	if !b.Par.sp {
		return x
	}
	s := append([]int64(nil), b.Shape(x)...)
	s[len(s)-2] *= b.Par.Tp
	i := b.AddOp("all_gather", "sp_all_gather", []Value{x})
	y := b.Out(i, "gathered", s, b.Dtype(x), "sequence-parallel all-gather of the layer input (freed after the column-parallel matmuls)")
	n := b.Val(y).Bytes
	b.noteSymmMem(b.Val(x).Bytes)                           // async TP: the shard passes through the workspace
	b.RecordCommUB("all_gather", n, i, false)               // beside the readers' forward GEMMs with userbuffers
	b.RecordCommBeside("reduce_scatter", "tp", n, i, false) // the input gradient, beside the readers' wgrad GEMMs
	return y
}

// colLinear is a column-parallel linear: x is the layer input as held
// between parallel regions (sequence-sharded with SP), xg the input the
// matmul reads (tpGather(x)); outFull the unsharded width, outLocal this
// rank's. One GPU (or a replicated output) lowers as nn.Linear.
func (b *Builder) ColLinear(name string, role Role, x, xg Value, in, outFull, outLocal int64, bias bool) Value {
	if b.Par.Tpn() == 1 {
		return b.Linear(name, role, xg, in, outFull, bias)
	}
	if b.teConverts(role) { // Transformer Engine's fp8 linear (te_fp8.go)
		return b.teColLinear(name, role, xg, in, outFull, outLocal, bias)
	}
	if b.aoTP() && b.float8Converts(role) { // torchao's Float8ColwiseParallel (float8_tp.go)
		return b.aoLinear(name, role, xg, in, outLocal, outFull*in, outFull, bias, true)
	}
	defer b.Scope(name)()
	b.refuseTPParamTarget()
	w := b.Param("weight", []int64{outLocal, in}, role)
	b.ShardParam(w, outFull*in)
	params := []int32{w}
	if bias {
		bi := b.Param("bias", []int64{outLocal}, role)
		b.ShardParam(bi, outFull)
		params = append(params, bi)
	}
	dt := b.Dtype(xg)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xm := b.Cast(xg, dt, "autocast copy of linear input")
	// What autograd keeps for the weight gradient: Megatron's sequence-
	// parallel linear keeps the sharded input and gathers it again in the
	// backward; DTensor's (tp_runtime="torch") keeps the gathered one.
	xs := xm
	regather := b.Par.sp && !b.Par.torchTP && !b.Par.keepGathered
	if regather {
		xs = b.Cast(x, dt, "autocast copy of the sequence-sharded linear input")
	}
	wv := b.Weight(w, dt)
	ins := []Value{xm}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	b.Op(i).TEGemm = b.teGemm(role) // Megatron-Core's TE layers (megatron_te.go)
	y := b.Out(i, "out", WithLast(b.Shape(xm), outLocal), dt, b.Concat("output of column-parallel linear ", b.Name("")))
	if b.Trainable(w) {
		b.Save(i, xs)
		if regather {
			// The weight gradient needs the whole input: gathered again in
			// backward into a buffer the size of the gathered input.
			b.Op(i).WorkB += b.Val(xm).Bytes
			b.recordInputComm("all_gather", xg, b.Val(xm).Bytes, i, true)
		}
	}
	if b.Grad(xm) {
		b.Save(i, wv)
		if !b.Par.sp {
			// copy_to_tensor_model_parallel_region: identity forward,
			// all-reduce of the input gradient in backward.
			b.recordInputComm("all_reduce", xg, b.Val(xm).Bytes, i, false)
		}
	}
	t := Rows(b.Shape(xm))
	b.Op(i).Flops = 2 * float64(t) * float64(in) * float64(outLocal)
	b.Op(i).Bytes += float64(b.Val(xm).Bytes) + float64(dt.Bytes(in*outLocal))
	if b.adapts(role) {
		y = b.loraAdapter(xg, y, in, outLocal) // xg, not xm: lora_A casts its own copy
	}
	return y
}

// rowLinear is a row-parallel linear reading this rank's [.., inLocal]
// slice: partial sums all-reduced in place, or reduce-scattered along the
// sequence with SP (a new, sequence-sharded tensor).
func (b *Builder) RowLinear(name string, role Role, x Value, inFull, inLocal, out int64, bias bool) Value {
	if b.Par.Tpn() == 1 {
		return b.Linear(name, role, x, inFull, out, bias)
	}
	if b.teConverts(role) { // Transformer Engine's fp8 linear (te_fp8.go)
		return b.TpReduce(name, b.teLinear(name, role, x, inLocal, out, out*inFull, 0, bias))
	}
	if b.aoTP() && b.float8Converts(role) { // torchao's Float8RowwiseParallel (float8_tp.go)
		return b.TpReduce(name, b.aoLinear(name, role, x, inLocal, out, out*inFull, 0, bias, false))
	}
	done := b.Scope(name)
	b.refuseTPParamTarget()
	w := b.Param("weight", []int64{out, inLocal}, role)
	b.ShardParam(w, out*inFull)
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{out}, role)) // replicated
	}
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of linear input")
	wv := b.Weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	b.Op(i).TEGemm = b.teGemm(role) // Megatron-Core's TE layers (megatron_te.go)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, b.Concat("partial output of row-parallel linear ", b.Name(""), " (summed over tp ranks)"))
	if b.Trainable(w) {
		b.Save(i, xin)
	}
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	t := Rows(b.Shape(xin))
	b.Op(i).Flops = 2 * float64(t) * float64(inLocal) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(inLocal*out))
	if b.adapts(role) {
		y = b.loraAdapter(x, y, inLocal, out) // x, not xin: lora_A casts its own copy
	}
	done()
	return b.TpReduce(name, y)
}

// tpReduce sums partial outputs over the TP group: all-reduce in place
// (reduce_from_tensor_model_parallel_region), or with SP a reduce-scatter
// into a sequence-sharded tensor (reduce_scatter_to_sequence_parallel_region).
func (b *Builder) TpReduce(name string, y Value) Value {
	n := b.Val(y).Bytes
	if !b.Par.sp {
		b.RecordComm("all_reduce", "tp", n, false)
		return y
	}
	s := append([]int64(nil), b.Shape(y)...)
	s[len(s)-2] /= b.Par.Tp
	src := b.Val(y).Producer
	i := b.AddOp("reduce_scatter", b.Concat(name, ".reduce_scatter"), []Value{y})
	z := b.Out(i, b.Concat(name, ".out"), s, b.Dtype(y), b.Concat("sequence-parallel reduce-scatter of ", name, "'s partial sums"))
	if src >= 0 && b.Op(src).Kind == "matmul" {
		// async TP: two output chunks in the workspace; the gradient's
		// all-gather in the backward, a chunk's size, fits in them
		b.noteSymmMem(2 * b.Val(z).Bytes)
		// with userbuffers, the reduce-scatter beside the row-parallel
		// GEMM, the gradient's all-gather beside its dgrad GEMM
		b.RecordCommUB("reduce_scatter", n, src, false)
		b.RecordCommUB("all_gather", n, src, true)
	} else {
		b.RecordComm("reduce_scatter", "tp", n, false)
		b.RecordComm("all_gather", "tp", n, true)
	}
	return z
}

// headLinear is the output layer: nn.Linear on one GPU, column-parallel
// over the vocabulary with TP (the logits stay split: [.., V/tp]).
func (b *Builder) headLinear(m *Model, x Value) Value {
	in := b.Last(x)
	tp := b.Par.Tpn()
	return b.ColLinear(m.Head(), RoleLMHead, x, b.TpGather(x), in, m.Vocab, m.Vocab/tp, m.HeadBias)
}

// vocabParallelCE is Megatron's _VocabParallelCrossEntropy
// (megatron/core/tensor_parallel/cross_entropy.py): the logits shard is
// copied to fp32, the max subtracted in place, exponentiated and
// normalised in place and saved (exp_logits) with the target mask and the
// shifted targets; its backward turns the saved softmax into the gradient
// in place, which autograd casts back to the logits' dtype. Three small
// all-reduces (max, sum of exponentials, predicted logit) per micro-batch.
func (b *Builder) vocabParallelCE(x Value) Value {
	if b.Par.teCE {
		return b.teParallelCE(x)
	}
	name := "vocab_parallel_cross_entropy"
	if b.Par.fusedCE {
		name = FusedVocabParallelCE
	}
	lab, local := b.megatronLabels(x)
	i := b.AddOp("cross_entropy", name, []Value{x, lab})
	sm := b.Out(i, "softmax", b.Shape(x), units.FP32, "fp32 softmax of the logits shard (saved; becomes the gradient in place)")
	b.Val(sm).Grad = false
	t := Rows(b.Shape(x))
	mask := b.Out(i, "target_mask", []int64{t}, units.BOOL, "targets outside this rank's vocabulary shard")
	tgt := b.Out(i, "masked_target", []int64{t}, units.INT64, "targets shifted into this rank's shard")
	b.Val(mask).Grad, b.Val(tgt).Grad = false, false
	loss := b.Out(i, "loss", nil, units.FP32, "loss")
	b.Save(i, sm, mask, tgt)
	b.Op(i).Flops = 5 * float64(Numel(b.Shape(x)))
	if b.Par.fusedCE {
		b.fuseVocabParallelCE(i, sm)
	}
	if b.Par.Tpn() > 1 {
		for range 3 {
			b.RecordComm("all_reduce", "tp", units.FP32.Bytes(t), false)
		}
	}
	if local != NoValue {
		b.Release("labels", []Value{local}) // compute_language_model_loss's local, freed when it returns
	}
	return loss
}
