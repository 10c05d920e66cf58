package core

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
type HeadLoss struct {
	ChunkTokens        int64  // tokens per chunk (LitGPT), or
	Chunks             int64  // number of chunks along the sequence (torchtune)
	UpcastAfterForward bool   // all chunks to fp32 once the forward returns (Fabric convert_output)
	KeepLogits         bool   // the logits list lives until the end of the step
	PerTokenLoss       bool   // reduction="none" then cat + mean (LitGPT); else a sum per chunk
	softcap            bool   // Gemma 2's logit soft-capping on each chunk
	scale              bool   // Granite's logits_scaling on each chunk (Model.LogitScale)
	head               string // the output layer's module path (Model.Head); "" = lm_head
}

// chunkLengths splits seq tokens per the recipe.
func (o HeadLoss) ChunkLengths(seq int64) []int64 {
	size := o.ChunkTokens
	if size <= 0 {
		n := max(o.Chunks, 1)
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
func (b *Builder) ChunkedHeadLoss(x Value, vocab int64, bias bool, o HeadLoss, tiedTo int32) Value {
	in := b.Last(x)
	s := b.Shape(x)
	batch := Numel(s[:len(s)-2])
	seq := s[len(s)-2]
	done := b.Scope(headPath(o.head))
	var w int32
	var params []int32
	quant := b.quantizes(RoleLMHead)
	w, params = b.LinearParams(RoleLMHead, in, vocab, bias)
	if tiedTo >= 0 {
		b.P.Params[w].TiedTo = tiedTo
		quant = false
	}
	if quant {
		if b.Trainable(w) {
			panic(LowerError{&units.Error{Path: b.Name(""), Msg: "lm_head is trainable but quant_lm_head stores it quantized", Hint: "freeze it (freeze=[\"lm_head\"])"}})
		}
		b.P.Params[w].Quant = b.Ft.quant
	}
	lengths := o.ChunkLengths(seq)
	logits := make([]Value, len(lengths))
	xq := NoValue
	if quant {
		xq = b.Cast(x, b.Prec.Compute, "input cast to the bitsandbytes compute dtype")
	}
	var ad *chunkAdapter
	if b.adapts(RoleLMHead) {
		ad = b.newChunkAdapter(in, vocab)
	}
	for i, n := range lengths {
		if quant {
			logits[i] = b.quantMatmulChunk(w, params, xq, in, vocab, []int64{batch, n, vocab})
		} else {
			logits[i] = b.HeadChunk(w, params, x, n, in, vocab)
		}
		if ad != nil {
			logits[i] = ad.apply(b, x, logits[i], n)
		}
	}
	if o.scale {
		for i, l := range logits {
			logits[i] = b.scaleLogits(l)
		}
	}
	if o.softcap {
		for i, l := range logits {
			logits[i] = b.Softcap("logit_softcap", l)
		}
	}
	done()
	defer b.Scope("loss")()
	var losses []Value
	labels := b.Labels(x)
	ce := func(i int, l Value) {
		n := lengths[i]
		if o.PerTokenLoss && i == len(lengths)-1 {
			n-- // logits[-1][..., :-1, :]: the last position predicts nothing
		}
		lab := b.LabelChunk(labels, i, n, o.PerTokenLoss)
		losses = append(losses, b.ChunkCE(i, l, lab, batch, n, vocab, o.PerTokenLoss))
	}
	if o.UpcastAfterForward {
		up := make([]Value, len(logits))
		for i, l := range logits {
			up[i] = b.CastChunk(i, l)
		}
		b.Release("convert_output", logits) // the bf16 list is dropped once every chunk is converted
		for i, l := range up {
			ce(i, l)
		}
		if o.KeepLogits {
			b.P.Held = append(b.P.Held, up...)
		}
	} else {
		for i, l := range logits {
			closeGraph := b.LossGraph("cross_entropy_" + Itoa(int64(i))) // torchtune's compile_loss: each chunk's compute_cross_entropy
			ce(i, b.CastChunk(i, l))
			closeGraph()
		}
		if o.KeepLogits {
			b.P.Held = append(b.P.Held, logits...)
		} else {
			b.Release("del_logits", logits) // del logits before backward
		}
	}
	if o.PerTokenLoss {
		var tokens int64
		for _, l := range losses {
			tokens += Numel(b.Shape(l))
		}
		ic := b.AddOp("cat", "cat", losses)
		all := b.Out(ic, "losses", []int64{tokens}, units.FP32, "per-token losses of all chunks (torch.cat)")
		im := b.AddOp("mean", "mean", []Value{all})
		return b.Out(im, "loss", nil, units.FP32, "loss")
	}
	is := b.AddOp("sum", "sum", losses)
	return b.Out(is, "loss", nil, units.FP32, "loss")
}

// ChunkOperand is what a matmul with a weight on the chunk of x n tokens
// long reads (x.chunk or x.split along the sequence: a view of x). Under
// autocast, a cast of the chunk: a chunk of several sequences is not
// dense, so the cast is contiguous (Tensor.to, preserve_format).
// Otherwise the view itself when matmul's fold of it to [batch*n, in] is
// a view (one sequence, one token, or the whole sequence: saving it keeps
// x's storage), or when the weight needs no gradient (matmul then runs
// bmm on the view, unfolded); else a contiguous copy: a weight that
// requires grad makes matmul fold the strided chunk with reshape (torch
// 2.15's torch/_decomp/decompositions.py, should_fold and matmul, lines
// 5251-5332). what names x in the reasons.
func (b *Builder) ChunkOperand(x Value, n int64, weightGrad bool, what string) Value {
	s := b.Shape(x)
	batch, seq := Numel(s[:len(s)-2]), s[len(s)-2]
	shape := []int64{batch, n, s[len(s)-1]}
	if b.Prec.Autocast && b.Dtype(x) != b.Prec.Compute {
		dt := b.Prec.Compute
		i := b.AddOp("cast", "to_"+dt.Name(), []Value{x})
		y := b.Out(i, "chunk."+dt.Name(), shape, dt, "autocast copy of a chunk of the "+what)
		b.Op(i).Bytes += float64(b.Dtype(x).Bytes(Numel(shape)))
		return y
	}
	if batch == 1 || n == 1 || n == seq || !weightGrad {
		return x
	}
	i := b.AddOp("copy", "chunk_copy", []Value{x})
	y := b.Out(i, "chunk", shape, b.Dtype(x), "contiguous copy of a chunk of the "+what+" (matmul's fold)")
	b.Op(i).Bytes += float64(b.Dtype(x).Bytes(Numel(shape)))
	return y
}

// HeadChunk is one lm_head call on the chunk of x n tokens long
// (ChunkOperand), for logits [batch, n, out].
func (b *Builder) HeadChunk(w int32, params []int32, x Value, n, in, out int64) Value {
	xin := b.ChunkOperand(x, n, b.Trainable(w), "lm_head input")
	s := b.Shape(x)
	shape := []int64{Numel(s[:len(s)-2]), n, out}
	dt := b.Dtype(xin)
	wv := b.headWeight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	y := b.Out(i, "out", shape, dt, "logits chunk")
	if b.Trainable(w) {
		b.Save(i, xin)
	}
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(Numel(shape[:len(shape)-1])) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(dt.Bytes(Numel(shape)/out*in)) + float64(dt.Bytes(in*out))
	return y
}

// headWeight is the weight a chunk's matmul reads (the lm_head's, or a
// LoRA adapter's on it). Autocast caches
// the cast of a weight that requires grad, so every chunk reads (and saves)
// one copy; a frozen weight is cast anew by each call (tools/oracle
// vectors, torch 2.15).
func (b *Builder) headWeight(w int32, dt units.DType) Value {
	if !b.Trainable(w) {
		return b.Weight(w, dt)
	}
	if b.headCast == nil {
		b.headCast = map[int32]Value{}
	}
	if v, ok := b.headCast[w]; ok {
		return v
	}
	v := b.Weight(w, dt)
	b.headCast[w] = v
	return v
}

// quantMatmulChunk is a quantized lm_head call on a slice of x: the whole
// weight is dequantized for every chunk.
func (b *Builder) quantMatmulChunk(w int32, params []int32, xin Value, in, out int64, shape []int64) Value {
	y := b.quantMatmul(w, params, xin, in, out)
	v := b.Val(y)
	v.Shape, v.Bytes = shape, v.Dtype.Bytes(Numel(shape))
	b.Op(int32(len(b.P.Ops) - 1)).Flops = 2 * float64(Numel(shape[:len(shape)-1])) * float64(in) * float64(out)
	return y
}

// castChunk upcasts a logits chunk to fp32 (ToCopyBackward saves nothing).
func (b *Builder) CastChunk(i int, l Value) Value {
	if b.Dtype(l) == units.FP32 {
		return l
	}
	c := b.AddOp("cast", "to_fp32_"+Itoa(int64(i)), []Value{l})
	y := b.Out(c, "logits_fp32."+Itoa(int64(i)), b.Shape(l), units.FP32, "logits chunk upcast to fp32")
	b.Op(c).Bytes += float64(b.Val(l).Bytes)
	return y
}

// chunkCE is cross_entropy on one chunk: log_softmax saved (fp32), the
// nll gradient dense in backward.
func (b *Builder) ChunkCE(i int, l, lab Value, batch, n, vocab int64, perToken bool) Value {
	ic := b.AddOp("cross_entropy", "cross_entropy_"+Itoa(int64(i)), []Value{l, lab})
	lsm := b.Out(ic, "log_probs."+Itoa(int64(i)), []int64{batch * n, vocab}, b.Dtype(l), "log_softmax of a logits chunk (saved by cross-entropy)")
	b.Val(lsm).Grad = false
	tw := b.totalWeight(ic, "total_weight."+Itoa(int64(i)), b.Dtype(l))
	var loss Value
	if perToken {
		loss = b.Out(ic, "loss."+Itoa(int64(i)), []int64{batch * n}, units.FP32, "per-token loss of a chunk (reduction=\"none\")")
	} else {
		loss = b.Out(ic, "loss."+Itoa(int64(i)), nil, units.FP32, "loss of a chunk")
	}
	b.Save(ic, lsm, lab, tw)
	b.Op(ic).WorkB = b.Val(lsm).Bytes
	b.Op(ic).Flops = 5 * float64(batch*n*vocab)
	return loss
}

// LabelChunk is chunk i, n tokens long, of the labels as a chunk's
// cross-entropy reads them: target_chunk.reshape(-1) of labels.chunk(...)
// (torchtune), or of targets[..., 1:].split(...) when shifted (LitGPT's
// chunked_cross_entropy). reshape is a view of the labels when the chunk
// is contiguous (one sequence, one token, or every unshifted token), else
// a copy (tools/oracle vectors, torch 2.15).
func (b *Builder) LabelChunk(labels Value, i int, n int64, shifted bool) Value {
	s := b.Shape(labels)
	batch, seq := Numel(s[:len(s)-1]), s[len(s)-1]
	if batch == 1 || n == 1 || (n == seq && !shifted) {
		return labels
	}
	ic := b.AddOp("copy", "labels_copy_"+Itoa(int64(i)), []Value{labels})
	v := b.Out(ic, "labels."+Itoa(int64(i)), []int64{batch * n}, units.INT64, "contiguous copy of a chunk of the labels (reshape)")
	b.Val(v).Grad = false
	return v
}

// release is a bookkeeping op that ends the forward life of vs: a Python
// list dropped at once (it computes nothing and has no backward).
func (b *Builder) Release(name string, vs []Value) {
	b.AddOp("release", name, append([]Value(nil), vs...))
}

// chunkHead reports whether the plan asks for torchtune's chunked output
// (loss_chunks > 1) on a cross-entropy language model.
func (ft *Finetune) chunkHead(m *Model) bool {
	return ft != nil && ft.lossChunks > 1 && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// chunkedModelLoss is the model's lm_head and loss as torchtune runs them
// with num_output_chunks = loss_chunks.
func (b *Builder) chunkedModelLoss(m *Model, x Value) Value {
	return b.ChunkedHeadLoss(x, m.Vocab, m.HeadBias, HeadLoss{Chunks: b.Ft.lossChunks, softcap: m.LogitSoftcap > 0, scale: m.LogitScale > 0, head: m.Head()}, b.embedWeight(m))
}

// embedWeight is the embedding weight a tied lm_head shares, or -1 when
// the model does not tie them.
func (b *Builder) embedWeight(m *Model) int32 {
	if m.Tied() {
		for pi := b.bodyFirst; pi < len(b.P.Params); pi++ {
			if b.P.Params[pi].Role == RoleEmbed {
				return int32(pi)
			}
		}
	}
	return -1
}
