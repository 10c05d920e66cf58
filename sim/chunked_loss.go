package sim

import "github.com/memsh/memsh/sim/units"

// Chunked output head and cross-entropy: the lm_head runs on slices of
// the sequence and the loss is computed per slice, so the vocabulary-wide
// fp32 tensors of one slice exist at a time instead of the whole
// sequence's.
//
// Two recipes are modelled:
//
//   - torchtune's CEWithChunkedOutputLoss (train(..., loss_chunks=n)): the
//     model returns the logits as n chunks along the sequence
//     (TransformerDecoder num_output_chunks), the loss upcasts each chunk
//     with .float() right before its cross_entropy, and the recipe drops
//     the logits list (del logits) before backward. log_softmax outputs
//     of every chunk are saved (fp32), as unchunked.
//   - LitGPT's training loop (LitHead): lm_head_chunk_size=128 tokens,
//     Fabric converts every chunk to fp32 when the forward returns, the
//     bf16 chunks are dropped together after that, chunked_cross_entropy
//     with reduction="none", torch.cat(...).mean(); the fp32 logits list
//     stays referenced by the loop until the step ends.
type headLoss struct {
	chunkTokens        int64 // tokens per chunk (LitGPT), or
	chunks             int64 // number of chunks along the sequence (torchtune)
	upcastAfterForward bool  // all chunks to fp32 once the forward returns (Fabric convert_output)
	keepLogits         bool  // the logits list lives until the end of the step
	perTokenLoss       bool  // reduction="none" then cat + mean (LitGPT); else a sum per chunk
	softcap            bool  // Gemma 2's logit soft-capping on each chunk (softcap.go)
}

// chunkLengths splits seq tokens per the recipe.
func (o headLoss) chunkLengths(seq int64) []int64 {
	size := o.chunkTokens
	if size <= 0 {
		n := max(o.chunks, 1)
		size = divUp(seq, n) // torch.chunk: equal chunks of ceil(seq/n), the last smaller
	}
	var out []int64
	for left := seq; left > 0; left -= size {
		out = append(out, min(size, left))
	}
	return out
}

// chunkedHeadLoss lowers lm_head over chunks of x and the chunked
// cross-entropy, and returns the loss. tiedTo is the index of the
// embedding weight the head shares, or -1.
func (b *builder) chunkedHeadLoss(x Value, vocab int64, bias bool, o headLoss, tiedTo int32) Value {
	in := b.last(x)
	s := b.shape(x)
	batch := numel(s[:len(s)-2])
	seq := s[len(s)-2]
	done := b.scope("lm_head")
	var w int32
	var params []int32
	quant := b.quantizes("lm_head")
	w, params = b.linearParams("lm_head", in, vocab, bias)
	if tiedTo >= 0 {
		b.p.Params[w].TiedTo = tiedTo
		quant = false
	}
	if quant {
		if b.trainable(w) {
			panic(lowerError{&units.Error{Path: b.name(""), Msg: "lm_head is trainable but quant_lm_head stores it quantized", Hint: "freeze it (freeze=[\"lm_head\"])"}})
		}
		b.p.Params[w].quant = b.ft.quant
	}
	lengths := o.chunkLengths(seq)
	logits := make([]Value, len(lengths))
	xin := x
	if quant {
		xin = b.cast(x, b.prec.Compute, "input cast to the bitsandbytes compute dtype")
	} else if b.prec.Autocast {
		xin = b.cast(x, b.prec.Compute, "autocast copy of lm_head input")
	}
	for i, n := range lengths {
		shape := []int64{batch, n, vocab}
		if quant {
			logits[i] = b.quantMatmulChunk(w, params, xin, in, vocab, shape)
			continue
		}
		logits[i] = b.headChunk(w, params, xin, in, vocab, shape)
	}
	if o.softcap {
		for i, l := range logits {
			logits[i] = b.softcap("logit_softcap", l)
		}
	}
	done()
	defer b.scope("loss")()
	var losses []Value
	ce := func(i int, l Value) {
		n := lengths[i]
		if o.perTokenLoss && i == len(lengths)-1 {
			n-- // logits[-1][..., :-1, :]: the last position predicts nothing
		}
		losses = append(losses, b.chunkCE(i, l, batch, n, vocab, o.perTokenLoss))
	}
	if o.upcastAfterForward {
		up := make([]Value, len(logits))
		for i, l := range logits {
			up[i] = b.castChunk(i, l)
		}
		b.release("convert_output", logits) // the bf16 list is dropped once every chunk is converted
		for i, l := range up {
			ce(i, l)
		}
		if o.keepLogits {
			b.p.held = append(b.p.held, up...)
		}
	} else {
		for i, l := range logits {
			ce(i, b.castChunk(i, l))
		}
		if o.keepLogits {
			b.p.held = append(b.p.held, logits...)
		} else {
			b.release("del_logits", logits) // del logits before backward
		}
	}
	if o.perTokenLoss {
		var tokens int64
		for _, l := range losses {
			tokens += numel(b.shape(l))
		}
		ic := b.addOp("cat", "cat", losses)
		all := b.out(ic, "losses", []int64{tokens}, units.FP32, "per-token losses of all chunks (torch.cat)")
		im := b.addOp("mean", "mean", []Value{all})
		return b.out(im, "loss", nil, units.FP32, "loss")
	}
	is := b.addOp("sum", "sum", losses)
	return b.out(is, "loss", nil, units.FP32, "loss")
}

// headChunk is one lm_head call on a slice of x (a view: saving it keeps
// x's storage).
func (b *builder) headChunk(w int32, params []int32, xin Value, in, out int64, shape []int64) Value {
	dt := b.dtype(xin)
	wv := b.headWeight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "", ins, params...)
	y := b.out(i, "out", shape, dt, "logits chunk")
	if b.trainable(w) {
		b.save(i, xin)
	}
	if b.grad(xin) {
		b.save(i, wv)
	}
	b.op(i).Flops = 2 * float64(numel(shape[:len(shape)-1])) * float64(in) * float64(out)
	b.op(i).bytes += float64(dt.Bytes(numel(shape)/out*in)) + float64(dt.Bytes(in*out))
	return y
}

// headWeight is the lm_head weight a chunk's matmul reads. Autocast caches
// the cast of a weight that requires grad, so every chunk reads (and saves)
// one copy; a frozen weight is cast anew by each call (tools/oracle
// vectors, torch 2.15).
func (b *builder) headWeight(w int32, dt units.DType) Value {
	if !b.trainable(w) {
		return b.weight(w, dt)
	}
	if b.headCast == nil {
		b.headCast = map[int32]Value{}
	}
	if v, ok := b.headCast[w]; ok {
		return v
	}
	v := b.weight(w, dt)
	b.headCast[w] = v
	return v
}

// quantMatmulChunk is a quantized lm_head call on a slice of x: the whole
// weight is dequantized for every chunk.
func (b *builder) quantMatmulChunk(w int32, params []int32, xin Value, in, out int64, shape []int64) Value {
	y := b.quantMatmul(w, params, xin, in, out)
	v := b.val(y)
	v.shape, v.Bytes = shape, v.dtype.Bytes(numel(shape))
	b.op(int32(len(b.p.Ops) - 1)).Flops = 2 * float64(numel(shape[:len(shape)-1])) * float64(in) * float64(out)
	return y
}

// castChunk upcasts a logits chunk to fp32 (ToCopyBackward saves nothing).
func (b *builder) castChunk(i int, l Value) Value {
	if b.dtype(l) == units.FP32 {
		return l
	}
	c := b.addOp("cast", "to_fp32_"+itoa(int64(i)), []Value{l})
	y := b.out(c, "logits_fp32."+itoa(int64(i)), b.shape(l), units.FP32, "logits chunk upcast to fp32")
	b.op(c).bytes += float64(b.val(l).Bytes)
	return y
}

// chunkCE is cross_entropy on one chunk: log_softmax saved (fp32), the
// nll gradient dense in backward.
func (b *builder) chunkCE(i int, l Value, batch, n, vocab int64, perToken bool) Value {
	ic := b.addOp("cross_entropy", "cross_entropy_"+itoa(int64(i)), []Value{l})
	lsm := b.out(ic, "log_probs."+itoa(int64(i)), []int64{batch * n, vocab}, b.dtype(l), "log_softmax of a logits chunk (saved by cross-entropy)")
	b.val(lsm).grad = false
	var loss Value
	if perToken {
		loss = b.out(ic, "loss."+itoa(int64(i)), []int64{batch * n}, units.FP32, "per-token loss of a chunk (reduction=\"none\")")
	} else {
		loss = b.out(ic, "loss."+itoa(int64(i)), nil, units.FP32, "loss of a chunk")
	}
	b.save(ic, lsm)
	b.op(ic).workB = b.val(lsm).Bytes
	b.op(ic).Flops = 5 * float64(batch*n*vocab)
	return loss
}

// release is a bookkeeping op that ends the forward life of vs: a Python
// list dropped at once (it computes nothing and has no backward).
func (b *builder) release(name string, vs []Value) {
	b.addOp("release", name, append([]Value(nil), vs...))
}

// chunkHead reports whether the plan asks for torchtune's chunked output
// (loss_chunks > 1) on a cross-entropy language model.
func (ft *finetune) chunkHead(m *Model) bool {
	return ft != nil && ft.lossChunks > 1 && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// chunkedModelLoss is the model's lm_head and loss as torchtune runs them
// with num_output_chunks = loss_chunks.
func (b *builder) chunkedModelLoss(m *Model, x Value) Value {
	tied := int32(-1)
	if m.tied() {
		for pi := range b.p.Params {
			if b.p.Params[pi].Role == "embed" {
				tied = int32(pi)
				break
			}
		}
	}
	return b.chunkedHeadLoss(x, m.Vocab, m.HeadBias, headLoss{chunks: b.ft.lossChunks, softcap: m.LogitSoftcap > 0}, tied)
}
