package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The keys under which RelEmbeddings leaves, once a forward, what every
// DisentangledAttention of the encoder reads.
const (
	relEmbeddingsKey = "deberta.rel_embeddings"
	relPositionKey   = "deberta.relative_pos"
	relMaskKey       = "deberta.attention_mask"
)

// RelEmbeddings is DeBERTa-v2's encoder-level relative position table
// (transformers 5.25.0 models/deberta_v2/modeling_deberta_v2.py,
// DebertaV2Encoder): rel_embeddings, an nn.Embedding of Rows = 2 x
// position_buckets rows whose weight, through LayerNorm (norm_rel_ebd
// "layer_norm", get_rel_embedding), every layer's attention reads; and
// relative_pos, the [1, seq, seq] int64 bucketed distances
// (build_relative_position), made once a forward. It passes x through:
// both are made before the layers, outside their checkpoints, and shared
// with them (core.Builder.Share).
type RelEmbeddings struct {
	Rows int64
	Dim  int64
}

func (r *RelEmbeddings) Kind() string           { return "rel_embeddings" }
func (r *RelEmbeddings) Label() string          { return "" }
func (r *RelEmbeddings) DefaultName() string    { return "" } // its modules sit in the encoder
func (r *RelEmbeddings) Children() []core.Layer { return nil }
func (r *RelEmbeddings) Params() int64          { return r.Rows*r.Dim + 2*r.Dim }
func (r *RelEmbeddings) Summary() string        { return fmt.Sprintf("%d x %d", r.Rows, r.Dim) }
func (r *RelEmbeddings) InDim() int64           { return r.Dim }
func (r *RelEmbeddings) OutDim() int64          { return r.Dim }
func (r *RelEmbeddings) Validate(path string) error {
	if err := core.Positive(path, "rows", r.Rows); err != nil {
		return err
	}
	return core.Positive(path, "dim", r.Dim)
}

func (r *RelEmbeddings) Lower(b *core.Builder, x core.Value) core.Value {
	if _, ok := b.SharedValue(relEmbeddingsKey); ok {
		return x // made once a lowering, as the attention masks are: copied blocks read the same ones
	}
	s := b.Shape(x)
	seq := s[len(s)-2]
	w := b.Param("rel_embeddings.weight", []int64{r.Rows, r.Dim}, core.Role("rel_embeddings"))
	table := b.Weight(w, b.Prec.Params)
	if table == core.NoValue { // the weight is read where it lies
		i := b.AddOp("view", "rel_embeddings", nil, w)
		table = b.Out(i, "rel_embeddings", []int64{r.Rows, r.Dim}, b.Prec.Params, "rel_embeddings.weight")
		b.Val(table).Cat = core.CatParams // the parameter itself, not an activation
	}
	first := len(b.P.Ops)
	normed := b.LayerNorm("LayerNorm", table, r.Dim, true)
	for i := first; i < len(b.P.Ops); i++ {
		b.OutsideRegions(int32(i)) // get_rel_embedding runs in the encoder's forward, before its layers
	}
	b.Share(relEmbeddingsKey, normed)
	i := b.AddOp("relative_position", "relative_pos", nil)
	pos := b.Out(i, "relative_pos", []int64{1, seq, seq}, units.INT64, "the bucketed relative positions made once a forward (build_relative_position), handed to every layer")
	b.Val(pos).Grad = false
	b.Op(i).NoGradB = true
	b.OutsideRegions(i)
	b.Share(relPositionKey, pos)
	// get_attention_mask: the [batch, seq] mask times its transpose,
	// [batch, 1, seq, seq] in the mask's dtype (the collator's int64),
	// every layer's positional argument (a checkpoint saves it).
	m := b.AddOp("attention_mask", "attention_mask", nil)
	mask := b.Out(m, "attention_mask", []int64{core.Rows(s) / seq, 1, seq, seq}, units.INT64, "the extended attention mask made once a forward (get_attention_mask), handed to every layer")
	b.Val(mask).Grad = false
	b.Op(m).NoGradB = true
	b.OutsideRegions(m)
	b.Share(relMaskKey, mask)
	return x
}

// DisentangledAttention is DeBERTa-v2/v3's DisentangledSelfAttention with
// share_att_key and pos_att_type c2p|p2c (every v3 checkpoint), eager
// (the model has no SDPA or flash path), and its output dense and dropout
// (DebertaV2SelfOutput; the residual and LayerNorm are the caller's).
// Per layer, what autograd keeps (transformers 5.25.0, torch 2.15.0,
// measured: tools/oracle/deberta/README.md):
//
//   - q, k, v: transpose_for_scores' contiguous [batch*heads, seq, d]
//     copies; k^T / scale, a new tensor (bmm's operand), the 0-dim scale
//     (scaled_size_sqrt: sqrt(d * 3), .to(dtype)) for each of the three
//     divisions.
//   - the relative table (RelEmbeddings, through pos_dropout) projected by
//     this layer's query_proj and key_proj (share_att_key), each
//     contiguous per head and .repeat'ed over the batch: [batch*heads, 2P,
//     d], the c2p and p2c bmm's operands.
//   - c2p = q @ pos_k^T and p2c = k @ pos_q^T, [batch*heads, seq, 2P]:
//     torch.gather saves its whole input, and its index, clamp(relative_pos
//     +- P), a [1, seq, seq] int64 this layer makes.
//   - the bool mask masked_fill reads (~attention_mask.bool(), [batch, 1,
//     seq, seq]), the softmax output, the P.V operands.
type DisentangledAttention struct {
	Name    string
	Dim     int64
	Heads   int64
	Span    int64   // att_span: position_buckets, else max_relative_positions
	Dropout float64 // attention_probs_dropout_prob
	Hidden  float64 // hidden_dropout_prob: pos_dropout and the output's dropout
}

func (a *DisentangledAttention) Kind() string           { return "disentangled_attention" }
func (a *DisentangledAttention) Label() string          { return a.Name }
func (a *DisentangledAttention) DefaultName() string    { return "attention" }
func (a *DisentangledAttention) Children() []core.Layer { return nil }
func (a *DisentangledAttention) Params() int64          { return 4 * (a.Dim*a.Dim + a.Dim) }
func (a *DisentangledAttention) Summary() string {
	return fmt.Sprintf("%d heads, %d relative positions", a.Heads, 2*a.Span)
}
func (a *DisentangledAttention) InDim() int64  { return a.Dim }
func (a *DisentangledAttention) OutDim() int64 { return a.Dim }
func (a *DisentangledAttention) Validate(path string) error {
	if err := core.Positive(path, "dim", a.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "heads", a.Heads); err != nil {
		return err
	}
	if a.Dim%a.Heads != 0 {
		return units.Errorf(path, "heads (%d) must divide dim (%d)", a.Heads, a.Dim)
	}
	for _, p := range []float64{a.Dropout, a.Hidden} {
		if p < 0 || p >= 1 {
			return units.Errorf(path, "dropout probability must be in [0, 1) (got %g)", p)
		}
	}
	return core.Positive(path, "span", a.Span)
}

func (a *DisentangledAttention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "disentangled_attention", a.Dim, b.Last(x)))
	}
	rel, ok1 := b.SharedValue(relEmbeddingsKey)
	relPos, ok2 := b.SharedValue(relPositionKey)
	extMask, ok3 := b.SharedValue(relMaskKey)
	if !ok1 || !ok2 || !ok3 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "a DeBERTa attention without the encoder's relative embeddings",
			Hint: "the encoder must hold DeBERTa's rel_embeddings before its layers (hf_config builds it)"}})
	}
	name := b.ModuleName(a)
	defer b.Scope(name)()
	closeSelf := b.Scope("self") // DisentangledSelfAttention: the projections and the scores; output.dense beside it
	s := b.Shape(x)
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	h, d, span := a.Heads, a.Dim/a.Heads, a.Span
	bh := batch * h
	dt := b.Dtype(x)
	heads := func(name string, y core.Value, rows, reps int64) core.Value {
		c := b.Ew("contiguous", name, []core.Value{y}, []int64{h, rows, d}, dt, "transpose_for_scores' contiguous copy of "+name)
		if reps == 1 {
			return c
		}
		return b.Ew("repeat", name+"_repeat", []core.Value{c}, []int64{bh, rows, d}, dt, name+" repeated over the batch (.repeat)")
	}
	fold := func(name string, y core.Value) core.Value {
		return b.Ew("contiguous", name, []core.Value{y}, []int64{bh, seq, d}, dt, "transpose_for_scores' contiguous copy of "+name)
	}
	q := fold("query_layer", b.Linear("query_proj", core.RoleQ, x, a.Dim, a.Dim, true))
	k := fold("key_layer", b.Linear("key_proj", core.RoleK, x, a.Dim, a.Dim, true))
	v := fold("value_layer", b.Linear("value_proj", core.RoleV, x, a.Dim, a.Dim, true))
	scale := func(name string) core.Value { // scaled_size_sqrt(...).to(dtype): a 0-dim tensor per division
		i := b.AddOp("sqrt", name, nil)
		y := b.Out(i, name, nil, dt, "sqrt(head_dim * 3) as a 0-dim tensor (scaled_size_sqrt)")
		b.Val(y).Grad = false
		b.Op(i).NoGradB = true
		return y
	}
	div := func(name string, y core.Value, shape []int64) core.Value {
		sc := scale(name + "_scale")
		i := b.AddOp("div", name, []core.Value{y, sc})
		out := b.Out(i, name, shape, dt, name+" over the scale")
		b.Save(i, sc)
		b.Op(i).Flops = float64(core.Numel(shape))
		b.Op(i).Bytes += float64(b.Val(y).Bytes)
		return out
	}
	bmm := func(name string, l, r core.Value, shape []int64, inner int64) core.Value {
		i := b.AddOp("matmul", name, []core.Value{l, r})
		y := b.Out(i, name, shape, dt, name)
		if b.Grad(r) {
			b.Save(i, l)
		}
		if b.Grad(l) {
			b.Save(i, r)
		}
		b.Op(i).Flops = 2 * float64(core.Numel(shape)) * float64(inner)
		b.Op(i).Bytes += float64(b.Val(l).Bytes + b.Val(r).Bytes)
		return y
	}
	scores := bmm("scores", q, div("key_layer_t", k, []int64{bh, d, seq}), []int64{bh, seq, seq}, d)

	// The relative table: pos_dropout, then this layer's query_proj and
	// key_proj (the same weights) over its 2P rows.
	rd := b.Dropout("pos_dropout", rel, a.Hidden)
	rows := b.Shape(rel)[0]
	undo := b.ReuseParams()
	posQ := heads("pos_query_layer", b.Linear("query_proj", core.RoleQ, rd, a.Dim, a.Dim, true), rows, batch)
	posK := heads("pos_key_layer", b.Linear("key_proj", core.RoleK, rd, a.Dim, a.Dim, true), rows, batch)
	undo()
	index := func(name string, n int) core.Value { // clamp(+-relative_pos + P, 0, 2P - 1): 1 to 2 temporaries, then the index
		y := relPos
		for j := 0; j < n; j++ {
			y = b.Ew("index_arith", fmt.Sprintf("%s_%d", name, j), []core.Value{y}, []int64{1, seq, seq}, units.INT64, "relative positions shifted by the span")
		}
		c := b.Ew("clamp", name, []core.Value{y}, []int64{1, seq, seq}, units.INT64, "the gather's index, clamped to the table (expanded over batch*heads, a view)")
		b.Val(c).Grad = false
		return c
	}
	gather := func(name string, att, idx core.Value) core.Value {
		i := b.AddOp("gather", name, []core.Value{att, idx})
		y := b.Out(i, name, []int64{bh, seq, seq}, dt, name+" gathered at the bucketed relative positions")
		b.Save(i, att, idx) // gather's backward reads its whole input (derivatives.yaml: self) and the index
		b.Op(i).Bytes += float64(b.Val(idx).Bytes)
		return y
	}
	tab := []int64{bh, seq, 2 * span}
	c2p := div("c2p", gather("c2p_att", bmm("c2p_scores", q, posK, tab, d), index("c2p_pos", 1)), []int64{bh, seq, seq})
	p2c := div("p2c", gather("p2c_att", bmm("p2c_scores", k, posQ, tab, d), index("p2c_pos", 2)), []int64{bh, seq, seq})
	sum := b.Ew("add", "rel_att", []core.Value{c2p}, []int64{bh, seq, seq}, dt, "0 + c2p (score += ...)")
	sum = b.Ew("add", "rel_att_p2c", []core.Value{sum, p2c}, []int64{bh, seq, seq}, dt, "c2p + p2c")
	scores = b.Ew("add", "attention_scores", []core.Value{scores, sum}, []int64{bh, seq, seq}, dt, "content and relative scores")

	// masked_fill(~attention_mask.bool(), min): two bool tensors a layer, the second saved.
	mask := b.Ew("bool", "attention_mask_bool", []core.Value{extMask}, []int64{batch, 1, seq, seq}, units.BOOL, "attention_mask.bool()")
	notMask := b.Ew("not", "attention_mask_not", []core.Value{mask}, []int64{batch, 1, seq, seq}, units.BOOL, "~attention_mask (masked_fill's mask, saved)")
	b.Val(mask).Grad, b.Val(notMask).Grad = false, false
	mf := b.AddOp("masked_fill", "masked_scores", []core.Value{scores, notMask})
	masked := b.Out(mf, "masked_scores", []int64{batch, h, seq, seq}, dt, "masked attention scores")
	b.Save(mf, notMask)
	b.Op(mf).Bytes += float64(b.Val(scores).Bytes + b.Val(notMask).Bytes)
	sm := b.AddOp("softmax", "softmax", []core.Value{masked})
	p := b.Out(sm, "probs", []int64{batch, h, seq, seq}, dt, "attention probabilities (softmax output, saved)")
	b.Save(sm, p)
	b.Op(sm).Bytes += float64(b.Val(masked).Bytes)
	p = b.Dropout("dropout", p, a.Dropout)
	ctx := bmm("context", p, v, []int64{bh, seq, d}, seq)
	merged := b.Ew("contiguous", "context_layer", []core.Value{ctx}, s, dt, "the heads merged (permute + contiguous), the output dense's input")
	closeSelf()
	y := b.Linear("output.dense", core.RoleO, merged, a.Dim, a.Dim, true)
	return b.Dropout("output.dropout", y, a.Hidden)
}

// MaskMul is DebertaV2Embeddings' embeddings * mask: the attention mask
// (one of ones when the batch has none, DebertaV2Model.forward),
// unsqueezed to [batch, seq, 1] and cast to the embeddings' dtype, a new
// tensor the product saves for the embeddings' gradient.
type MaskMul struct {
	Name string
	Dim  int64
}

func (m *MaskMul) Kind() string               { return "mask_mul" }
func (m *MaskMul) Label() string              { return m.Name }
func (m *MaskMul) DefaultName() string        { return "" } // unnamed: the product runs in the embeddings' forward
func (m *MaskMul) Children() []core.Layer     { return nil }
func (m *MaskMul) Params() int64              { return 0 }
func (m *MaskMul) Summary() string            { return "embeddings * attention_mask" }
func (m *MaskMul) InDim() int64               { return m.Dim }
func (m *MaskMul) OutDim() int64              { return m.Dim }
func (m *MaskMul) Validate(path string) error { return core.Positive(path, "dim", m.Dim) }

func (m *MaskMul) Lower(b *core.Builder, x core.Value) core.Value {
	s := b.Shape(x)
	mask := b.Ew("cast", "mask", nil, core.WithLast(s, 1), b.Dtype(x), "the attention mask as [batch, seq, 1] in the embeddings' dtype")
	b.Val(mask).Grad = false
	return b.Mul("masked_embeddings", x, mask)
}

// LabelGather is DebertaV2ForSequenceClassification's loss input with
// labels of one class a sample: label_index = (labels >= 0).nonzero(), a
// [batch, 1] int64, expanded over the classes, and torch.gather(logits, 0,
// index), which saves the logits and the index for backward (the loss then
// upcasts the gathered logits: .float()).
type LabelGather struct {
	Labels int64
}

func (g *LabelGather) Kind() string               { return "label_gather" }
func (g *LabelGather) Label() string              { return "" }
func (g *LabelGather) DefaultName() string        { return "" }
func (g *LabelGather) Children() []core.Layer     { return nil }
func (g *LabelGather) Params() int64              { return 0 }
func (g *LabelGather) Summary() string            { return "logits gathered at the labelled samples" }
func (g *LabelGather) InDim() int64               { return g.Labels }
func (g *LabelGather) OutDim() int64              { return g.Labels }
func (g *LabelGather) Validate(path string) error { return core.Positive(path, "labels", g.Labels) }

func (g *LabelGather) Lower(b *core.Builder, x core.Value) core.Value {
	s := b.Shape(x)
	idx := b.Ew("nonzero", "label_index", nil, []int64{core.Rows(s), 1}, units.INT64, "(labels >= 0).nonzero(): the labelled samples")
	b.Val(idx).Grad = false
	i := b.AddOp("gather", "labeled_logits", []core.Value{x, idx})
	y := b.Out(i, "labeled_logits", s, b.Dtype(x), "the logits of the labelled samples")
	b.Save(i, x, idx)
	return y
}
