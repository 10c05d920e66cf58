package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// HyperConnection is a manifold-constrained hyper-connection (mHC,
// DeepSeek-V4's DeepseekV4HyperConnection, models/deepseek_v4/
// modeling_deepseek_v4.py at transformers 5.25.0) around one sub-block:
// the residual is Streams parallel copies of the hidden state, carried
// as one [batch, seq, Streams x Dim] value, and each sub-block reads one
// weighted sum of them and writes back into all:
//
//	x = norm(streams.float())                    # unweighted RMSNorm over Streams x Dim, fp32
//	pre, post, comb = split(x @ fn^T)            # fn [(2+n) n, n Dim], fp32 (kept in fp32)
//	pre = sigmoid(pre*scale0 + base) + eps; post = 2 sigmoid(post*scale1 + base)
//	comb = softmax(comb*scale2 + base) + eps, then Sinkhorn: SinkhornIters
//	       column and row normalisations (2 x iters - 1 divisions)
//	y = Inner(sum_j pre_j streams_j)             # input_layernorm and self_attn, or the MoE's
//	streams = post ⊗ y + comb^T @ streams
//
// Inner is the sub-block (its norm and attention or MoE), named by the
// decoder layer's module tree: HyperConnection adds no scope of its own
// and names its parameters Module (attn_hc, ffn_hc). The whole module is
// kept in fp32 (_keep_in_fp32_modules_strict): its parameters are fp32
// whatever the model's dtype.
type HyperConnection struct {
	Module        string // attn_hc or ffn_hc
	Dim           int64  // hidden_size
	Streams       int64  // hc_mult
	SinkhornIters int64  // hc_sinkhorn_iters
	Inner         core.Layer
}

func (h *HyperConnection) mixes() int64 { return (2 + h.Streams) * h.Streams }

func (h *HyperConnection) Kind() string        { return "hyper_connection" }
func (h *HyperConnection) Label() string       { return "" }
func (h *HyperConnection) DefaultName() string { return "" } // its parameters take Module, its sub-block the layer's names
func (h *HyperConnection) Children() []core.Layer {
	return []core.Layer{h.Inner}
}
func (h *HyperConnection) InDim() int64  { return h.Streams * h.Dim }
func (h *HyperConnection) OutDim() int64 { return h.Streams * h.Dim }

// Params counts fn, base and scale (3) and the sub-block's.
func (h *HyperConnection) Params() int64 {
	return h.mixes()*h.Streams*h.Dim + h.mixes() + 3 + h.Inner.Params()
}

func (h *HyperConnection) Summary() string {
	return fmt.Sprintf("%s: %d streams of %d, %d Sinkhorn iterations", h.Module, h.Streams, h.Dim, h.SinkhornIters)
}

func (h *HyperConnection) Validate(path string) error {
	if err := core.Positive(path, "dim", h.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "streams", h.Streams); err != nil {
		return err
	}
	if err := core.Positive(path, "sinkhorn iterations", h.SinkhornIters); err != nil {
		return err
	}
	if h.Inner == nil {
		return units.Errorf(path, "a hyper-connection needs the sub-block it wraps")
	}
	return nil
}

// CheckLayout: the streams' mixing is not modelled under tensor or
// context parallelism (the sub-blocks would read gathered streams).
func (h *HyperConnection) CheckLayout(path string, par core.Parallelism) error {
	return checkNoTPCP(path, par, "DeepSeek-V4's hyper-connections")
}

// checkNoTPCP refuses tensor and context parallelism for what is modelled
// on one rank's whole sequence and heads only.
func checkNoTPCP(path string, par core.Parallelism, what string) error {
	if n := par.Norm(); n.TP > 1 || n.CP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("%s are not modelled under tensor or context parallelism (tp=%d, cp=%d)", what, n.TP, n.CP),
			Hint: "use tp=1 and cp=1 (dp, fsdp, zero, ep or pp)"}
	}
	return nil
}

// keepFP32 gives parameter w fp32 storage in a 16-bit model
// (_keep_in_fp32_modules_strict: from_pretrained loads it in fp32).
func keepFP32(b *core.Builder, w int32) int32 {
	if b.Prec.Params != units.FP32 {
		b.P.Params[w].DType = units.FP32
	}
	return w
}

// fp32Param registers parameter name of shape kept in fp32.
func fp32Param(b *core.Builder, name string, shape []int64, role core.Role) int32 {
	return keepFP32(b, b.Param(name, shape, role))
}

func (h *HyperConnection) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != h.InDim() {
		panic(core.ShapeMismatch(b, "hyper_connection", h.InDim(), b.Last(x)))
	}
	dt := b.Dtype(x)
	s := b.Shape(x)
	post, comb, collapsed := hyperWeights(b, h.Module, x, h.Streams, h.Dim, h.mixes(), h.SinkhornIters)
	y := b.LowerChild(h.Inner, collapsed)
	return hyperMix(b, x, y, post, comb, s, dt, h.Streams)
}

// hyperWeights lowers DeepseekV4HyperConnection.forward on the streams
// x ([.., n x dim] in dt): the fp32 mixing weights post [.., n] and comb
// [.., n, n] and the collapsed input of the sub-block [.., dim] in dt.
func hyperWeights(b *core.Builder, module string, x core.Value, n, dim, mixes, iters int64) (post, comb, collapsed core.Value) {
	dt := b.Dtype(x)
	s := b.Shape(x)
	rows := core.Rows(s)
	done := b.Scope(module)
	fn := fp32Param(b, "fn", []int64{mixes, n * dim}, core.RoleLinear)
	base := fp32Param(b, "base", []int64{mixes}, core.RoleNorm)
	scale := fp32Param(b, "scale", []int64{3}, core.RoleNorm)
	mixed := streamLogits(b, x, fn, mixes, "pre, post and comb logits (F.linear(x, fn.float()))")
	// pre, post: w * scale[k] + base, sigmoid (saves its result); the
	// products with scale save w (scale's gradient) and scale.
	gate := func(name string, width int64) core.Value {
		j := b.AddOp("mul", name+"_scaled", []core.Value{mixed}, scale, base)
		y := b.Out(j, name+"_logits", core.WithLast(s, width), units.FP32, name+" * scale + base")
		if b.Trainable(scale) {
			b.Save(j, mixed)
		}
		return y
	}
	// sigmoid(..) + eps and 2 * sigmoid(..): new tensors beside the
	// sigmoids' saved outputs, which the products below keep.
	pre := plusEps(b, "pre", b.Unary("sigmoid", gate("pre", n), false, true))
	post = b.Ew("mul", "post", []core.Value{b.Unary("sigmoid", gate("post", n), false, true)}, core.WithLast(s, n), units.FP32, "2 * sigmoid(post logits)")
	cs := core.WithLast(s, n*n)
	c := b.AddOp("softmax", "comb", []core.Value{gate("comb", n*n)})
	comb = b.Out(c, "comb_softmax", cs, units.FP32, "softmax of the comb logits (saved)")
	b.Save(c, comb)
	comb = plusEps(b, "comb", comb)
	// Sinkhorn-Knopp: comb / (comb.sum(dim) + eps), 2 x iters - 1 times;
	// each division keeps its numerator and its [.., 1, n] denominator.
	for k := int64(0); k < 2*iters-1; k++ {
		d := b.AddOp("div", "sinkhorn", []core.Value{comb})
		den := b.Out(d, "sinkhorn_sum", core.WithLast(s, n), units.FP32, "a Sinkhorn row or column sum + eps (saved by the division)")
		next := b.Out(d, "sinkhorn", cs, units.FP32, "comb normalised once more (Sinkhorn-Knopp)")
		b.Save(d, comb, den)
		b.Op(d).Flops = 2 * float64(rows*n*n)
		comb = next
	}
	// collapsed = (pre.unsqueeze(-1) * streams).sum(2).to(dt): the product
	// keeps pre and the streams.
	m := b.AddOp("mul", "pre_streams", []core.Value{pre, x})
	prod := b.Out(m, "pre_streams", s, units.FP32, "pre-weighted streams (fp32)")
	saveProduct(b, m, pre, x)
	b.Op(m).Flops = float64(rows * n * dim)
	sum := b.Ew("sum", "collapsed", []core.Value{prod}, core.WithLast(s, dim), units.FP32, "the streams collapsed into the sub-block's input")
	done()
	return post, comb, b.Cast(sum, dt, "the collapsed input in the streams' dtype")
}

// hyperMix lowers the decoder layer's post.to(dt).unsqueeze(-1) *
// y.unsqueeze(-2) + matmul(comb.to(dt).transpose(-1, -2), streams): the
// sub-block's output written into every stream beside the mixed residual.
func hyperMix(b *core.Builder, x, y, post, comb core.Value, s []int64, dt units.DType, n int64) core.Value {
	rows := core.Rows(s)
	dim := s[len(s)-1] / n
	p := b.Cast(post, dt, "post in the streams' dtype")
	k := b.AddOp("mul", "post_out", []core.Value{p, y})
	out := b.Out(k, "post_out", s, dt, "the sub-block's output written into every stream (post ⊗ y)")
	saveProduct(b, k, p, y)
	b.Op(k).Flops = float64(rows * n * dim)
	c := b.Cast(comb, dt, "comb in the streams' dtype")
	i := b.AddOp("matmul", "comb_streams", []core.Value{c, x})
	mixed := b.Out(i, "comb_streams", s, dt, "the streams mixed by comb^T")
	saveProduct(b, i, c, x)
	b.Op(i).Flops = 2 * float64(rows) * float64(n*n*dim)
	b.Op(i).Bytes += float64(b.Val(x).Bytes + b.Val(c).Bytes)
	return b.Add("streams", out, mixed)
}

// saveProduct saves what a product's backward (mul, matmul) keeps: each
// factor where the other requires grad. Under LoRA the streams entering
// the first layer and what is made of them alone (its attention's hyper
// weights) require none (the embeddings and the hyper-connections'
// parameters are frozen), while the sub-block's output does: PyTorch
// keeps post there, not the output (tools/oracle/hf_block_saved.py on
// deepseek-v4-tiny.json with lora=o_b_proj).
func saveProduct(b *core.Builder, op int32, x, y core.Value) {
	if b.Grad(y) {
		b.Save(op, x)
	}
	if b.Grad(x) {
		b.Save(op, y)
	}
}

// plusEps is x + hc_eps, a new fp32 tensor that saves nothing.
func plusEps(b *core.Builder, name string, x core.Value) core.Value {
	return b.Ew("add", name+"_eps", []core.Value{x}, b.Shape(x), units.FP32, name+" + hc_eps")
}

// streamLogits is F.linear(input_norm(x.float()), fn.float()): the
// streams x upcast, normed without a weight and projected by the fp32
// parameter fn to width logits; the projection keeps the normed streams.
func streamLogits(b *core.Builder, x core.Value, fn int32, width int64, why string) core.Value {
	x32 := b.Cast(x, units.FP32, "the streams flattened and upcast (.float())")
	normed := unweightedRMSNorm(b, x32)
	i := b.AddOp("matmul", "fn", []core.Value{normed}, fn)
	y := b.Out(i, "mixes", core.WithLast(b.Shape(x), width), units.FP32, why)
	if b.Trainable(fn) {
		b.Save(i, normed)
	}
	b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(x))) * float64(b.Last(x)) * float64(width)
	b.Op(i).Bytes += float64(b.Val(normed).Bytes) + float64(units.FP32.Bytes(width*b.Last(x)))
	return y
}

// unweightedRMSNorm is DeepseekV4UnweightedRMSNorm on an fp32 x:
// x * rsqrt(x.float().square().mean(-1) + eps).to(x.dtype); square keeps
// x, rsqrt its result, the product both.
func unweightedRMSNorm(b *core.Builder, x32 core.Value) core.Value {
	shape := b.Shape(x32)
	ms, _, _ := meanSquareFP32(b, x32, shape[len(shape)-1], "the unweighted RMSNorm")
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{ms})
	rs := b.Out(ir, "rsqrt", []int64{core.Rows(shape), 1}, units.FP32, "rsqrt(mean of x² + eps), saved by rsqrt")
	b.Save(ir, rs)
	return b.Mul("normalized", x32, rs)
}

// HyperExpand is DeepseekV4Model's entry into the streams:
// inputs_embeds.unsqueeze(2).expand(.., hc_mult, ..).contiguous(), a
// copy of the embeddings in every stream.
type HyperExpand struct {
	Dim, Streams int64
}

func (h *HyperExpand) Kind() string               { return "hyper_expand" }
func (h *HyperExpand) Label() string              { return "" }
func (h *HyperExpand) DefaultName() string        { return "" }
func (h *HyperExpand) Children() []core.Layer     { return nil }
func (h *HyperExpand) Params() int64              { return 0 }
func (h *HyperExpand) InDim() int64               { return h.Dim }
func (h *HyperExpand) OutDim() int64              { return h.Streams * h.Dim }
func (h *HyperExpand) Summary() string            { return fmt.Sprintf("%d x %d", h.Streams, h.Dim) }
func (h *HyperExpand) Validate(path string) error { return core.Positive(path, "streams", h.Streams) }

func (h *HyperExpand) Lower(b *core.Builder, x core.Value) core.Value {
	return b.Ew("expand", "hc_streams", []core.Value{x}, core.WithLast(b.Shape(x), h.OutDim()), b.Dtype(x), "the embeddings copied into every hyper-connection stream")
}

// HyperHead is DeepseekV4HyperHead (hc_head), the streams' last collapse
// before the final norm, kept in fp32:
//
//	pre = sigmoid(norm(x.float()) @ hc_fn^T * hc_scale + hc_base) + eps
//	return (pre.unsqueeze(-1) * x).sum(2).to(x.dtype)
type HyperHead struct {
	Name         string
	Dim, Streams int64
}

func (h *HyperHead) Kind() string               { return "hyper_head" }
func (h *HyperHead) Label() string              { return h.Name }
func (h *HyperHead) DefaultName() string        { return "hc_head" }
func (h *HyperHead) Children() []core.Layer     { return nil }
func (h *HyperHead) Params() int64              { return h.Streams*h.Streams*h.Dim + h.Streams + 1 }
func (h *HyperHead) InDim() int64               { return h.Streams * h.Dim }
func (h *HyperHead) OutDim() int64              { return h.Dim }
func (h *HyperHead) Summary() string            { return fmt.Sprintf("%d streams of %d", h.Streams, h.Dim) }
func (h *HyperHead) Validate(path string) error { return core.Positive(path, "streams", h.Streams) }

func (h *HyperHead) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != h.InDim() {
		panic(core.ShapeMismatch(b, "hyper_head", h.InDim(), b.Last(x)))
	}
	defer b.Scope(b.ModuleName(h))()
	n, dt, s := h.Streams, b.Dtype(x), b.Shape(x)
	fn := fp32Param(b, "hc_fn", []int64{n, n * h.Dim}, core.RoleLinear)
	base := fp32Param(b, "hc_base", []int64{n}, core.RoleNorm)
	scale := fp32Param(b, "hc_scale", []int64{1}, core.RoleNorm)
	mixes := streamLogits(b, x, fn, n, "the collapse logits")
	j := b.AddOp("mul", "scaled", []core.Value{mixes}, scale, base)
	logits := b.Out(j, "logits", core.WithLast(s, n), units.FP32, "mixes * hc_scale + hc_base")
	if b.Trainable(scale) {
		b.Save(j, mixes)
	}
	pre := plusEps(b, "pre", b.Unary("sigmoid", logits, false, true))
	m := b.AddOp("mul", "pre_streams", []core.Value{pre, x})
	prod := b.Out(m, "pre_streams", s, units.FP32, "pre-weighted streams (fp32)")
	saveProduct(b, m, pre, x)
	sum := b.Ew("sum", "collapsed", []core.Value{prod}, core.WithLast(s, h.Dim), units.FP32, "the streams collapsed")
	return b.Cast(sum, dt, "the collapse in the streams' dtype")
}
