package sim

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

// parLowering is the distributed part of the lowering context. The zero
// value is one GPU.
type parLowering struct {
	tp, cp, ep int64
	sp         bool // sequence parallelism (tp > 1)
	megatronCE bool // Megatron's vocabulary-parallel cross-entropy
}

func (l parLowering) tpn() int64 { return max(l.tp, 1) }
func (l parLowering) cpn() int64 { return max(l.cp, 1) }
func (l parLowering) epn() int64 { return max(l.ep, 1) }

// spDiv is the factor by which sequence parallelism shards tokens.
func (l parLowering) spDiv() int64 {
	if l.sp {
		return l.tp
	}
	return 1
}

// configure sets the distributed lowering of plan p on b.
func (p *Plan) configureLowering(b *builder) {
	if !p.Parallel.Active() {
		return
	}
	par := p.Parallel.Norm()
	b.par = parLowering{tp: par.TP, cp: par.CP, ep: par.EP, sp: par.SequenceParallel,
		// Megatron's GPT loss is always the vocab-parallel cross-entropy; the
		// "megatron" precision stands for Megatron-LM's recipe.
		megatronCE: par.TP > 1 || p.Precision.Name == "megatron"}
	b.seq /= par.CP
	if par.FSDP && b.prec.Autocast {
		// FSDP's MixedPrecisionPolicy(param_dtype=bf16) all-gathers the
		// parameters in the compute dtype: the layers see bf16 weights and
		// autocast has nothing to cast or cache.
		b.prec.Params = b.prec.Compute
	}
}

// recordComm notes one collective of the micro-batch (comm.go).
func (b *builder) recordComm(kind, group string, bytes int64, backward bool) {
	if b.eval && backward {
		return
	}
	b.p.Comm = append(b.p.Comm, commRecord{kind: kind, Group: group, bytes: bytes, backward: backward})
}

// shardParam records the unsharded size of parameter pi.
func (b *builder) shardParam(pi int32, full int64) { b.p.Params[pi].fullNumel = full }

// tpGather all-gathers a sequence-parallel input along the sequence
// (gather_from_sequence_parallel_region); x itself without SP.
func (b *builder) tpGather(x Value) Value {
	if !b.par.sp {
		return x
	}
	s := append([]int64(nil), b.shape(x)...)
	s[len(s)-2] *= b.par.tp
	i := b.addOp("all_gather", "sp_all_gather", []Value{x})
	y := b.out(i, "gathered", s, b.dtype(x), "sequence-parallel all-gather of the layer input (freed after the column-parallel matmuls)")
	n := b.val(y).Bytes
	b.recordComm("all_gather", "tp", n, false)
	b.recordComm("reduce_scatter", "tp", n, true)
	return y
}

// colLinear is a column-parallel linear: x is the layer input as held
// between parallel regions (sequence-sharded with SP), xg the input the
// matmul reads (tpGather(x)); outFull the unsharded width, outLocal this
// rank's. One GPU (or a replicated output) lowers as nn.Linear.
func (b *builder) colLinear(name, role string, x, xg Value, in, outFull, outLocal int64, bias bool) Value {
	if b.par.tpn() == 1 {
		return b.linear(name, role, xg, in, outFull, bias)
	}
	defer b.scope(name)()
	w := b.param("weight", []int64{outLocal, in}, role)
	b.shardParam(w, outFull*in)
	params := []int32{w}
	if bias {
		bi := b.param("bias", []int64{outLocal}, role)
		b.shardParam(bi, outFull)
		params = append(params, bi)
	}
	dt := b.dtype(xg)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xm := b.cast(xg, dt, "autocast copy of linear input")
	xs := xm // what autograd keeps for the weight gradient
	if b.par.sp {
		xs = b.cast(x, dt, "autocast copy of the sequence-sharded linear input")
	}
	wv := b.weight(w, dt)
	ins := []Value{xm}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "", ins, params...)
	y := b.out(i, "out", withLast(b.shape(xm), outLocal), dt, "output of column-parallel linear "+b.name(""))
	if b.trainable(w) {
		b.save(i, xs)
		if b.par.sp {
			// The weight gradient needs the whole input: gathered again in
			// backward into a buffer the size of the gathered input.
			b.op(i).workB += b.val(xm).Bytes
			b.recordComm("all_gather", "tp", b.val(xm).Bytes, true)
		}
	}
	if b.grad(xm) {
		b.save(i, wv)
		if !b.par.sp {
			// copy_to_tensor_model_parallel_region: identity forward,
			// all-reduce of the input gradient in backward.
			b.recordComm("all_reduce", "tp", b.val(xm).Bytes, true)
		}
	}
	t := rows(b.shape(xm))
	b.op(i).Flops = 2 * float64(t) * float64(in) * float64(outLocal)
	b.op(i).bytes += float64(b.val(xm).Bytes) + float64(dt.Bytes(in*outLocal))
	if b.lora != nil && b.lora.targets(role) {
		y = b.loraAdapter(xm, y, in, outLocal)
	}
	return y
}

// rowLinear is a row-parallel linear reading this rank's [.., inLocal]
// slice: partial sums all-reduced in place, or reduce-scattered along the
// sequence with SP (a new, sequence-sharded tensor).
func (b *builder) rowLinear(name, role string, x Value, inFull, inLocal, out int64, bias bool) Value {
	if b.par.tpn() == 1 {
		return b.linear(name, role, x, inFull, out, bias)
	}
	done := b.scope(name)
	w := b.param("weight", []int64{out, inLocal}, role)
	b.shardParam(w, out*inFull)
	params := []int32{w}
	if bias {
		params = append(params, b.param("bias", []int64{out}, role)) // replicated
	}
	dt := b.dtype(x)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xin := b.cast(x, dt, "autocast copy of linear input")
	wv := b.weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "", ins, params...)
	y := b.out(i, "out", withLast(b.shape(xin), out), dt, "partial output of row-parallel linear "+b.name("")+" (summed over tp ranks)")
	if b.trainable(w) {
		b.save(i, xin)
	}
	if b.grad(xin) {
		b.save(i, wv)
	}
	t := rows(b.shape(xin))
	b.op(i).Flops = 2 * float64(t) * float64(inLocal) * float64(out)
	b.op(i).bytes += float64(b.val(xin).Bytes) + float64(dt.Bytes(inLocal*out))
	if b.lora != nil && b.lora.targets(role) {
		y = b.loraAdapter(xin, y, inLocal, out)
	}
	done()
	return b.tpReduce(name, y)
}

// tpReduce sums partial outputs over the TP group: all-reduce in place
// (reduce_from_tensor_model_parallel_region), or with SP a reduce-scatter
// into a sequence-sharded tensor (reduce_scatter_to_sequence_parallel_region).
func (b *builder) tpReduce(name string, y Value) Value {
	n := b.val(y).Bytes
	if !b.par.sp {
		b.recordComm("all_reduce", "tp", n, false)
		return y
	}
	s := append([]int64(nil), b.shape(y)...)
	s[len(s)-2] /= b.par.tp
	i := b.addOp("reduce_scatter", name+".reduce_scatter", []Value{y})
	z := b.out(i, name+".out", s, b.dtype(y), "sequence-parallel reduce-scatter of "+name+"'s partial sums")
	b.recordComm("reduce_scatter", "tp", n, false)
	b.recordComm("all_gather", "tp", n, true)
	return z
}

// headLinear is the output layer: nn.Linear on one GPU, column-parallel
// over the vocabulary with TP (the logits stay split: [.., V/tp]).
func (b *builder) headLinear(x Value, vocab int64, bias bool) Value {
	in := b.last(x)
	tp := b.par.tpn()
	return b.colLinear("lm_head", "lm_head", x, b.tpGather(x), in, vocab, vocab/tp, bias)
}

// vocabParallelCE is Megatron's _VocabParallelCrossEntropy
// (megatron/core/tensor_parallel/cross_entropy.py): the logits shard is
// copied to fp32, the max subtracted in place, exponentiated and
// normalised in place and saved (exp_logits) with the target mask and the
// shifted targets; its backward turns the saved softmax into the gradient
// in place, which autograd casts back to the logits' dtype. Three small
// all-reduces (max, sum of exponentials, predicted logit) per micro-batch.
func (b *builder) vocabParallelCE(x Value) Value {
	i := b.addOp("cross_entropy", "vocab_parallel_cross_entropy", []Value{x})
	sm := b.out(i, "softmax", b.shape(x), units.FP32, "fp32 softmax of the logits shard (saved; becomes the gradient in place)")
	b.val(sm).grad = false
	t := rows(b.shape(x))
	mask := b.out(i, "target_mask", []int64{t}, units.BOOL, "targets outside this rank's vocabulary shard")
	tgt := b.out(i, "masked_target", []int64{t}, units.INT64, "targets shifted into this rank's shard")
	b.val(mask).grad, b.val(tgt).grad = false, false
	loss := b.out(i, "loss", nil, units.FP32, "loss")
	b.save(i, sm, mask, tgt)
	b.op(i).Flops = 5 * float64(numel(b.shape(x)))
	if b.par.tpn() > 1 {
		for range 3 {
			b.recordComm("all_reduce", "tp", units.FP32.Bytes(t), false)
		}
	}
	return loss
}
