package sim

// QKNormAttention is Attention with an RMS norm over each head of q and k,
// applied after the projections and before the rotary embeddings: Qwen3's
// q_norm and k_norm (transformers/models/qwen3/modeling_qwen3.py,
// Qwen3Attention.forward), head_dim weights each. The norms are the same
// LlamaRMSNorm lowering as rmsnorm(), over [batch, seq, heads, head_dim].
// Everything else lowers as Attention does.
type QKNormAttention struct {
	Attention
}

func (a *QKNormAttention) Params() int64   { return a.Attention.Params() + 2*a.hd() }
func (a *QKNormAttention) Summary() string { return a.Attention.Summary() + ", qk-norm" }
func (a *QKNormAttention) InDim() int64    { return a.Dim }
func (a *QKNormAttention) OutDim() int64   { return a.Dim }

func (a *QKNormAttention) lower(b *builder, x Value) Value {
	at := &a.Attention
	if b.last(x) != at.Dim {
		panic(shapeMismatch(b, "attention", at.Dim, b.last(x)))
	}
	name := at.Name
	if name == "" {
		name = "attn"
	}
	defer b.scope(name)()
	// From here on, Attention.lower with the two head norms inserted after
	// the projections (keep the two in step).
	la := at.perRank(b.par.tpn())
	d, h, kv := la.hd(), la.Heads, la.kv()
	xg := b.tpGather(x)
	s := b.shape(xg)
	q := b.colLinear("q_proj", "q", x, xg, at.Dim, at.Heads*d, h*d, at.QKVBias)
	k := b.colLinear("k_proj", "k", x, xg, at.Dim, at.kv()*d, kv*d, at.QKVBias)
	v := b.colLinear("v_proj", "v", x, xg, at.Dim, at.kv()*d, kv*d, at.QKVBias)
	q = b.headNorm("q_norm", q, s, h, d)
	k = b.headNorm("k_norm", k, s, kv, d)
	if at.Rope {
		q = b.rope("q", q, withLast(s, h*d))
		k = b.rope("k", k, withLast(s, kv*d))
	}
	if at.Impl != "flash" && kv != h {
		k = b.expandKV("k", k, withLast(s, h*d))
		v = b.expandKV("v", v, withLast(s, h*d))
	}
	closeRegion := func() {}
	if b.ckpt.Selective {
		closeRegion = b.beginRegion("core")
	}
	var o Value
	if at.Impl == "eager" {
		o = la.eager(b, q, k, v, s)
	} else {
		o = la.fused(b, q, k, v, s)
	}
	closeRegion()
	y := b.rowLinear("o_proj", "o", o, at.Heads*d, h*d, at.Dim, at.OutBias)
	return b.dropout("resid_dropout", y, at.Dropout)
}

// headNorm is an RMS norm over the last dim of x viewed as
// [..., heads, headDim] (x.view(hidden_shape) shares x's storage, so the
// view is x with its shape split). The result is [..., heads*headDim].
func (b *builder) headNorm(name string, x Value, s []int64, heads, headDim int64) Value {
	split := append(append([]int64(nil), s[:len(s)-1]...), heads, headDim)
	if numel(split) != numel(b.shape(x)) {
		panic(lowerError{errorf(b.name(name), "cannot view %v as %v heads of %d", b.shape(x), heads, headDim)})
	}
	b.val(x).shape = split
	y := b.rmsNorm(name, x, headDim)
	b.val(x).shape = withLast(s, heads*headDim)
	b.val(y).shape = withLast(s, heads*headDim)
	return y
}
