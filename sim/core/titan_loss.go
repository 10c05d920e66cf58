package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// TitanLoss is the Plan.FusedLoss spelling of torchtitan's
// ChunkedLossWrapper (train(loss_chunks=("torchtitan", n)); Plan.LossChunks
// is its num_chunks).
const TitanLoss = "torchtitan"

// torchtitan's ChunkedLossWrapper with CrossEntropyLoss, read from
// torchtitan/components/loss.py at b5bcd76c6 (2026-08-21):
//
//   - the decoder returns the final norm's output, [T, D] (l.514;
//     models/common/decoder.py l.296: _skip_lm_head), and the trainer
//     drops it after the loss call (trainer.py l.795 del pred);
//   - it is split into num_chunks chunks of T/num_chunks tokens, a
//     divisibility torch._check refuses otherwise (l.602-611); a split
//     along dim 0 of a contiguous tensor is contiguous, so .contiguous()
//     returns it and .detach() shares its storage: each chunk is a view,
//     no copy (l.627-629); the labels' chunks too;
//   - GradAccumulator(hidden_states, dtype=torch.float32) allocates
//     zeros_like in fp32, [T, D], before the first chunk (l.431, l.640);
//   - per chunk, one after the other (l.666-689): logits = lm_head(chunk)
//     (bf16, held by the loop's variable until the next chunk's logits
//     are assigned, the last until the call returns), the loss
//     (cross_entropy_loss l.57: pred.float(), F.cross_entropy sum: the
//     fp32 copy dropped once log_softmax has run, log_softmax saved) and
//     chunk_loss.backward() at once: the nll gradient (fp32, dense) and
//     log_softmax's gradient (fp32) beside the saved log_softmax, then the
//     bf16 gradient of the logits (ToCopyBackward), then lm_head's
//     backward: the chunk's input gradient (bf16 [n, D], h_chunk.grad)
//     and the weight's, which AccumulateGrad stores (the first chunk) or
//     adds in place (a [V, D] temporary each later chunk);
//     grad_accumulator.add: h_chunk.grad.to(fp32) (a temporary) copied
//     into the buffer's slice (l.466-471), h_chunk.grad = None;
//   - after the loop (l.707): accumulated_grad = buffer.to(bf16), which
//     _DecoderOutputGradientBackProp saves (l.794) until the decoder's
//     backward takes it as the hidden states' gradient (l.815); the fp32
//     buffer goes when the call returns.
//
// Under FSDP the wrapper keeps lm_head unsharded across the chunks
// (set_reshard_after_forward(False), l.651-661): the replay's lm_head
// weight is gathered for the loss scope as one module already.

// validateTitan checks a plan asking for ChunkedLossWrapper.
func (p *Plan) validateTitan() error {
	what := fmt.Sprintf("loss_chunks=(%q, %d)", TitanLoss, p.LossChunks)
	m := p.Model
	switch {
	case p.LossChunks < 1:
		return &units.Error{Path: "train", Msg: what + ": num_chunks must be positive", Hint: "torchtitan's default is 8"}
	case m == nil || m.Vocab <= 0 || (m.Loss != "" && m.Loss != "cross_entropy"):
		return &units.Error{Path: "train", Msg: what + " chunks the output head and its cross-entropy: the model has none",
			Hint: "a language model with a vocabulary and the cross-entropy loss"}
	case p.QuantLMHead:
		return &units.Error{Path: "train", Msg: what + " does not combine with quant_lm_head", Hint: "drop quant_lm_head"}
	case p.LoRA != nil && p.LoRA.Adapts(RoleLMHead, m.Head()):
		return &units.Error{Path: "train", Msg: what + " is not modelled with a LoRA adapter on lm_head", Hint: "leave lm_head out of lora(targets=...)"}
	case p.Parallel.Norm().TP > 1 && p.Parallel.Norm().LossParallel != "torch":
		return &units.Error{Path: "train", Msg: what + " with tensor parallelism is modelled with the vocabulary-parallel loss torchtitan runs (torch's loss_parallel() until 2026, its own _LossParallelCrossEntropy since, which allocates the same)",
			Hint: `parallel(tp=..., loss_parallel="torch", tp_runtime="torch")`}
	}
	return nil
}

// titanHead reports whether the plan runs the head and loss as
// torchtitan's ChunkedLossWrapper.
func (ft *Finetune) titanHead(m *Model) bool {
	return ft != nil && ft.titan > 0 && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// titanLoop is one ChunkedLossWrapper call's state across its chunks.
type titanLoop struct {
	x, xin, buf, wv Value // the head input (gathered under TP), the chunk as the matmul reads it, the fp32 gradient buffer, the weight in the compute dtype
	gw              Value // lm_head's gradient once the first chunk made it
	n, d, vocab     int64 // rows a chunk, the hidden size, this rank's share of the vocabulary
	compute         units.DType
	wGrad           bool
	parallelCE      bool // each chunk's loss vocabulary-parallel on this rank's shard (tp > 1)
}

// titanModelLoss lowers lm_head and the cross-entropy on x ([.., T, D])
// as ChunkedLossWrapper runs them with num_chunks = b.Ft.titan, and
// returns the loss.
//
// Under tensor parallelism (torchtitan at b5bcd76c6: loss.py's
// docstring, "TP / SP composability", l.528-535): the root norm
// all-gathers its output back to replicated hidden states
// (models/common/decoder_sharding.py pre_lm_head_norm_config, b.TpGather),
// so every rank chunks all T rows; lm_head is column-parallel, each
// chunk's logits this rank's V/tp columns, and the chunk's loss is
// torchtitan's _LossParallelCrossEntropy (loss.py l.63-216), which
// replaced torch's loss_parallel() and allocates as it does
// (torchLossParallel): on the chunk's fp32 copy, shifted logits and their
// exponentials beside the saved log-probabilities, three all-reduces of
// the chunk's rows; its backward holds grad_input and exp(log_probs)
// (then their sum) beside the returned gradient. The chunks' input
// gradients are partial sums, reduced once where the accumulated gradient
// reaches the decoder ("autograd performs the implied reduction once when
// this gradient lands on the decoder-side leaf", l.478-481): the gather's
// reduce-scatter with sequence parallelism, an all-reduce without.
func (b *Builder) titanModelLoss(m *Model, x Value) Value {
	chunks := b.Ft.titan
	tp := b.Par.Tpn()
	if tp > 1 { // validateTitan: under torch's loss_parallel
		x = b.TpGather(x)
	}
	d := b.Last(x)
	tokens := Rows(b.Shape(x))
	if tokens%chunks != 0 {
		panic(LowerError{&units.Error{Path: "train", Msg: fmt.Sprintf("loss_chunks=(%q, %d): %d tokens a micro-batch do not split in %d equal chunks", TitanLoss, chunks, tokens, chunks),
			Hint: "ChunkedLossWrapper raises the same (sequence length must be divisible by num_chunks): pick num_chunks dividing batch x seq"}})
	}
	head, closeLoss := b.openFusedHead(m, x, d)
	defer closeLoss()
	params, labels := head.params, head.labels
	inGrad := b.Grad(x) && !b.Eval
	t := &titanLoop{x: x, buf: NoValue, wv: head.wv, gw: NoValue, n: tokens / chunks, d: d, vocab: m.Vocab / tp,
		compute: head.compute, wGrad: inGrad && b.Trainable(head.w), parallelCE: tp > 1}
	n, vocab, compute := t.n, t.vocab, t.compute
	noGrad := func(v Value) Value { b.Val(v).Grad = false; return v }

	held := []Value{x, labels}
	if inGrad {
		is := b.AddOp("zeros", "grad_accumulator", []Value{x}, params...)
		b.Op(is).NoGradB = true
		t.buf = noGrad(b.Out(is, "grad_buffer", []int64{tokens, d}, units.FP32, "GradAccumulator's buffer (zeros_like(hidden_states, dtype=fp32)): the head input's gradient, filled chunk by chunk"))
	}
	var losses []Value
	prev := NoValue
	for c := int64(0); c < chunks; c++ {
		k := Itoa(c)
		in := []Value{x, labels}
		if prev != NoValue {
			in = append(in, prev) // the previous chunk's logits, until this one's are assigned
		}
		if t.wv != NoValue {
			in = append(in, t.wv)
		}
		il := b.AddOp("matmul", "logits_"+k, in)
		lg := noGrad(b.Out(il, "logits."+k, []int64{n, vocab}, compute, "a chunk's logits (lm_head(h_chunk)), held by the loop until the next chunk's"))
		b.Op(il).NoGradB = true
		b.Op(il).Flops = 2 * float64(n*d) * float64(vocab)
		b.Op(il).Bytes += float64(compute.Bytes(n*d)) + float64(compute.Bytes(vocab*d))
		t.xin = x
		if b.Dtype(x) != compute { // autocast casts the chunk for the matmul, which saves the cast for the chunk's backward
			t.xin = noGrad(b.Out(il, "h_chunk."+compute.Name()+"."+k, []int64{n, d}, compute, "autocast copy of the chunk of hidden states, saved by the chunk's matmul"))
			b.Op(il).Bytes += float64(b.Dtype(x).Bytes(n * d))
		}
		prev = lg
		ic := b.AddOp("cast", "to_fp32_"+k, []Value{lg})
		up := noGrad(b.Out(ic, "logits_fp32."+k, []int64{n, vocab}, units.FP32, "pred.float() in cross_entropy_loss, dropped once log_softmax has run"))
		b.Op(ic).NoGradB = true
		b.Op(ic).Bytes += float64(b.Val(lg).Bytes)
		ice := b.AddOp("cross_entropy", "cross_entropy_"+k, []Value{up, labels})
		lsm := noGrad(b.Out(ice, "log_probs."+k, []int64{n, vocab}, units.FP32, "log_softmax of a chunk (saved for the chunk's backward)"))
		losses = append(losses, noGrad(b.Out(ice, "loss."+k, nil, units.FP32, "a chunk's loss (sum over its tokens)")))
		b.Op(ice).NoGradB = true
		b.Op(ice).Flops = 5 * float64(n*vocab)
		if t.parallelCE {
			// _LossParallelCrossEntropy on the fp32 shard: shifted, then
			// exp(shifted) or the log-probabilities beside it, and three
			// all-reduces of the chunk's rows (max, sum of exponentials,
			// the target's log-probability).
			b.Op(ice).WorkF = units.FP32.Bytes(n * vocab)
			for range 3 {
				b.RecordComm("all_reduce", "tp", units.FP32.Bytes(n), false)
			}
		}
		if !inGrad {
			continue
		}
		b.titanChunkBackward(t, k, lsm, lg, c > 0)
	}
	if !inGrad {
		il := b.AddOp("sum", "loss", append(append(held, losses...), prev), params...)
		return b.Out(il, "loss", nil, units.FP32, "loss (sum of the chunks' losses)")
	}
	ia := b.AddOp("cast", "accumulated_grad", []Value{t.buf, prev})
	acc := noGrad(b.Out(ia, "accumulated_grad", []int64{tokens, d}, b.Dtype(x), "grad_accumulator.result().to(hidden_states.dtype), saved by _DecoderOutputGradientBackProp: the hidden states' gradient"))
	b.Op(ia).NoGradB = true
	b.Op(ia).Bytes += float64(b.Val(t.buf).Bytes)
	in := append(append(held, acc), losses...)
	if t.gw != NoValue {
		in = append(in, t.gw)
	}
	il := b.AddOp("chunked_loss", "chunked_loss", in, params...)
	loss := b.Out(il, "loss", nil, units.FP32, "loss (_DecoderOutputGradientBackProp: total_loss detached)")
	b.Save(il, acc, t.gw)
	b.Op(il).GradsInForward = true
	if t.parallelCE && !b.Par.sp { // the partial input gradient made whole for the replicated norm output
		b.RecordComm("all_reduce", "tp", b.Val(acc).Bytes, true)
	}
	return loss
}

// titanChunkBackward is chunk k's chunk_loss.backward() and
// grad_accumulator.add, run inside the forward, from the chunk's saved
// log-probabilities lsm and logits lg. The first chunk makes lm_head's
// gradient t.gw; later ones add theirs through a temporary.
func (b *Builder) titanChunkBackward(t *titanLoop, k string, lsm, lg Value, later bool) {
	noGrad := func(v Value) Value { b.Val(v).Grad = false; return v }
	n, d, vocab, compute, x := t.n, t.d, t.vocab, t.compute, t.x
	nv := units.FP32.Bytes(n * vocab)
	// NllLossBackward's dense gradient (the workspace) and
	// LogSoftmaxBackward's output, beside the saved log_softmax; under tp
	// _LossParallelCrossEntropy's fused backward holds grad_input and
	// exp(log_probs) (then their sum) beside the returned gradient.
	i1 := b.AddOp("cross_entropy_backward", "cross_entropy_backward_"+k, []Value{lsm, lg})
	g32 := noGrad(b.Out(i1, "grad_logits_fp32."+k, []int64{n, vocab}, units.FP32, "log_softmax's backward: the fp32 copy's gradient"))
	op := b.Op(i1)
	op.NoGradB = true
	op.WorkF = nv
	if t.parallelCE {
		op.WorkF = 2 * nv
	}
	op.Flops = 5 * float64(n*vocab)
	op.Bytes = 4 * float64(nv) // the nll gradient written and read, log_softmax read, its gradient written
	i2 := b.AddOp("cast", "to_copy_backward_"+k, []Value{g32})
	g16 := noGrad(b.Out(i2, "grad_logits."+k, []int64{n, vocab}, compute, "ToCopyBackward: the logits' gradient in their dtype"))
	b.Op(i2).NoGradB = true
	b.Op(i2).Bytes += float64(nv)
	ins := []Value{g16, t.xin, t.buf}
	if t.wv != NoValue {
		ins = append(ins, t.wv)
	}
	i3 := b.AddOp("matmul", "lm_head_backward_"+k, ins)
	why := "h_chunk.grad: the chunk's input gradient"
	if t.parallelCE {
		why = "h_chunk.grad: the chunk's input gradient (a partial sum over the vocabulary shards, reduced once at the decoder)"
	}
	hg := noGrad(b.Out(i3, "h_chunk_grad."+k, []int64{n, d}, b.Dtype(x), why))
	op = b.Op(i3)
	op.NoGradB = true
	gemms := 1.0
	if t.wGrad {
		gemms = 2
		wdt := b.Prec.Params
		if !later {
			t.gw = noGrad(b.Out(i3, "lm_head_grad", []int64{vocab, d}, wdt, "lm_head's gradient, stored by the first chunk's backward (AccumulateGrad), added to by the others, in the forward"))
		} else {
			op.WorkF = wdt.Bytes(vocab * d) // the chunk's weight gradient, added in place
			op.Bytes += 2 * float64(wdt.Bytes(vocab*d))
		}
	}
	op.Flops = gemms * 2 * float64(n*d) * float64(vocab)
	op.Bytes += float64(compute.Bytes(vocab*d)) + float64(b.Dtype(x).Bytes(n*d))
	if t.gw != NoValue && later {
		op.In = append(op.In, t.gw)
	}
	i4 := b.AddOp("copy", "grad_accumulate_"+k, []Value{hg, t.buf})
	op = b.Op(i4)
	op.NoGradB = true
	if b.Dtype(x) != units.FP32 {
		op.WorkF = units.FP32.Bytes(n * d) // chunk_grad.to(fp32) before the slice copy
	}
	op.Bytes = float64(b.Dtype(x).Bytes(n*d)) + 3*float64(units.FP32.Bytes(n*d))
}
