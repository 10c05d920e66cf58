package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma3nLayer is one decoder layer of Gemma 3n's text model
// (Gemma3nTextDecoderLayer, Gemma3nTextAltUp and Gemma3nTextLaurelBlock in
// transformers' models/gemma3n/modeling_gemma3n.py, 5.25.0, l. 920-1070
// and 1248-1323). It reads and writes the AltUp streams, one [batch, seq,
// Streams x Dim] value (AltUpStreams), and runs its sub-blocks on the
// active stream (altup_active_idx; which one changes no size):
//
//	modalities(x) = tanh(modality_router(router_norm(x) * Dim^-1).float()).type_as(x)
//	predictions = streams + streams @ prediction_coefs(modalities(active stream)) (AltUp.predict)
//	a = predictions[active]; n = input_layernorm(a)
//	laurel = n + post_laurel_norm(linear_right(linear_left(n)))              (LAuReL)
//	h = (a + post_attention_layernorm(self_attn(n)) + laurel) / sqrt(2)
//	y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
//	corrected = predictions + repeat(y - a) * (correction_coefs(modalities(y)) + 1)   (AltUp.correct)
//	corrected[1:] += per-layer block(corrected[active].clone() * correct_output_scale)
//
// The norms are Gemma 3n's RMSNorms, Gemma 4's (Gemma4Norm); the
// attention is Gemma 4's (q, k, v norms, unscaled scores, keys and values
// shared by the last num_kv_shared_layers layers), the per-layer block
// Gemma 4's (Gemma4PerLayer). In training the correction coefficients'
// weight is clamped to ±altup_coef_clip (CoefClip: a new tensor the
// linear keeps); the prediction coefficients are clamped in place on
// .data, outside autograd. The streams' matmul with the coefficients
// keeps both (the streams as they are: a view), the sum with the streams
// is made contiguous (a new tensor); the in-place adds into the corrected
// streams allocate nothing.
type Gemma3nLayer struct {
	Dim, Streams int64
	LaurelRank   int64
	CoefClip     bool // altup_coef_clip is set
	CorrectScale bool // altup_correct_scale
	Attn         *Gemma4Attention
	MLP          *MLP
	PerLayer     *Gemma4PerLayer
}

func (l *Gemma3nLayer) Kind() string        { return "gemma3n_layer" }
func (l *Gemma3nLayer) Label() string       { return "" }
func (l *Gemma3nLayer) DefaultName() string { return "" } // its modules sit in the decoder layer
func (l *Gemma3nLayer) Children() []core.Layer {
	return []core.Layer{l.Attn, l.MLP, l.PerLayer}
}
func (l *Gemma3nLayer) InDim() int64  { return l.Streams * l.Dim }
func (l *Gemma3nLayer) OutDim() int64 { return l.Streams * l.Dim }

// Params: AltUp's (correct_output_scale, correction_coefs,
// prediction_coefs, modality_router, router_norm), LAuReL's, the four
// sublayer norms and the children's.
func (l *Gemma3nLayer) Params() int64 {
	d, n := l.Dim, l.Streams
	altup := d + n*n + n*n*n + d*n + d
	laurel := 2*d*l.LaurelRank + d
	return altup + laurel + 4*d + l.Attn.Params() + l.MLP.Params() + l.PerLayer.Params()
}

func (l *Gemma3nLayer) Summary() string {
	return fmt.Sprintf("%d streams of %d, LAuReL rank %d", l.Streams, l.Dim, l.LaurelRank)
}

func (l *Gemma3nLayer) Validate(path string) error {
	if err := checkStreams(path, l.Dim, l.Streams); err != nil {
		return err
	}
	if err := core.Positive(path, "laurel_rank", l.LaurelRank); err != nil {
		return err
	}
	if l.Attn == nil || l.MLP == nil || l.PerLayer == nil {
		return units.Errorf(path, "a Gemma 3n layer needs its attention, MLP and per-layer block")
	}
	for _, d := range []int64{l.Attn.Dim, l.MLP.Dim, l.PerLayer.Dim} {
		if d != l.Dim {
			return units.Errorf(path, "a sub-block %d wide in a layer %d wide", d, l.Dim)
		}
	}
	return nil
}

// CheckLayout: the streams are modelled on one rank's whole hidden size.
func (l *Gemma3nLayer) CheckLayout(path string, par core.Parallelism) error {
	return checkNoTPCP(path, par, "Gemma 3n's AltUp layers")
}

func (l *Gemma3nLayer) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != l.InDim() {
		panic(core.ShapeMismatch(b, "gemma3n_layer", l.InDim(), b.Last(x)))
	}
	s, dt, d, n := b.Shape(x), b.Dtype(x), l.Dim, l.Streams
	one := core.WithLast(s, d)
	rows := core.Rows(s)

	// AltUp.predict
	done := b.Scope("altup")
	mods := onStream(b, x, one, func() core.Value { return l.modalities(b, x) })
	coefs := b.Linear("prediction_coefs", core.Role("altup.prediction_coefs"), mods, n, n*n, false)
	done()
	// AltUp.predict and correct are methods, not the altup module's
	// forward: what they run besides altup's own modules (this matmul, the
	// clamped correction's F.linear) is the decoder layer's, as PyTorch's
	// module hooks see it (TestFLOPsAgainstTorch)
	i := b.AddOp("matmul", "altup_predict", []core.Value{x, coefs})
	p := b.Out(i, "predicted", s, dt, "the streams times the prediction coefficients")
	if b.Grad(coefs) {
		b.Save(i, x)
	}
	if b.Grad(x) {
		b.Save(i, coefs)
	}
	b.Op(i).Flops = 2 * float64(rows*n*n*d)
	pred := b.Ew("add", "predictions", []core.Value{p, x}, s, dt, "AltUp's predictions (+= the streams, made contiguous)")

	// the sub-blocks on the active stream
	active := onStream(b, pred, one, func() core.Value { return gemma4Norm(b, "input_layernorm", pred, d, true) })
	laurel := l.laurel(b, active)
	attn := gemma4Norm(b, "post_attention_layernorm", b.LowerChild(l.Attn, active), d, true)
	gated := b.Add("attn_gated", attn, pred) // pred[active] + attn
	h := b.Ew("div", "attn_laurel", []core.Value{b.Add("attn_plus_laurel", gated, laurel)}, one, dt, "(attention + LAuReL) / sqrt(2)")
	ff := gemma4Norm(b, "post_feedforward_layernorm", b.LowerChild(l.MLP, gemma4Norm(b, "pre_feedforward_layernorm", h, d, true)), d, true)
	y := b.Add("attn_ffw_laurel_gated", h, ff)

	// AltUp.correct
	done = b.Scope("altup")
	again := b.ReuseParams() // the router's second run: the same module
	mods = l.modalities(b, y)
	again()
	done()
	coef := l.correctionCoefs(b, mods)
	rep := b.Ew("repeat", "innovation", []core.Value{b.Ew("sub", "innovation", []core.Value{y, pred}, one, dt, "the layer's output less the active prediction")},
		s, dt, "the innovation repeated for every stream")
	corrected := b.Mul("corrected", rep, coef)
	b.KeepAlive("corrected += predictions (in place)", corrected, pred)
	first := b.Ew("clone", "first_prediction", []core.Value{corrected}, one, dt, "the corrected active stream (clone)")
	if l.CorrectScale {
		first = correctOutputScale(b, first, d)
	}
	pl := b.LowerChild(l.PerLayer, first)
	b.KeepAlive("corrected[1:] += the per-layer block's output (in place)", corrected, pl)
	return corrected
}

// modalities is compute_router_modalities(x): router_norm, the product
// with the 0-dim router_input_scale buffer (nothing saved),
// modality_router, tanh in fp32 (it keeps its output) and the cast back.
func (l *Gemma3nLayer) modalities(b *core.Builder, x core.Value) core.Value {
	dt := b.Dtype(x)
	normed := gemma4Norm(b, "router_norm", x, l.Dim, true)
	scaled := b.Ew("mul", "router_inputs", []core.Value{normed}, b.Shape(normed), dt, "router_norm(x) * hidden_size^-1")
	routed := b.Linear("modality_router", core.Role("altup.modality_router"), scaled, l.Dim, l.Streams, false)
	t := b.Unary("tanh", b.Cast(routed, units.FP32, "the router's logits in fp32 (.float())"), false, true)
	return b.Cast(t, dt, "the modalities in the streams' dtype (type_as)")
}

// correctionCoefs is correction_coefs(modalities) + 1. In training with
// altup_coef_clip the weight is clamped first and applied with F.linear
// (a new [n, n] tensor the product keeps, as it keeps the modalities),
// past the module's forward: a LoRA adapter PEFT puts on it never runs.
func (l *Gemma3nLayer) correctionCoefs(b *core.Builder, mods core.Value) core.Value {
	const role = core.Role("altup.correction_coefs")
	n := l.Streams
	var y core.Value
	if !l.CoefClip {
		done := b.Scope("altup")
		y = b.Linear("correction_coefs", role, mods, n, n, false)
		done()
	} else {
		done := b.Scope("altup.correction_coefs")
		w := b.Param("weight", []int64{n, n}, role)
		b.IdleAdapter(role, n, n)
		done() // the clamp and F.linear run in the decoder layer's forward
		c := b.AddOp("clamp", "correction_coefs_clamped", nil, w)
		wc := b.Out(c, "weight_clamped", []int64{n, n}, b.Prec.Params, "the correction coefficients' weight clamped to ±altup_coef_clip")
		i := b.AddOp("matmul", "", []core.Value{mods, wc})
		y = b.Out(i, "out", b.Shape(mods), b.Dtype(mods), "the correction coefficients")
		if b.Grad(wc) {
			b.Save(i, mods)
		}
		if b.Grad(mods) {
			b.Save(i, wc)
		}
		b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(mods))*n*n)
	}
	return b.Ew("add", "coefs_plus_one", []core.Value{y}, b.Shape(y), b.Dtype(y), "the correction coefficients + 1")
}

// laurel is Gemma3nTextLaurelBlock: x + post_laurel_norm(linear_right(linear_left(x))).
func (l *Gemma3nLayer) laurel(b *core.Builder, x core.Value) core.Value {
	defer b.Scope("laurel")()
	left := b.Linear("linear_left", core.Role("laurel.linear_left"), x, l.Dim, l.LaurelRank, false)
	right := b.Linear("linear_right", core.Role("laurel.linear_right"), left, l.LaurelRank, l.Dim, false)
	return b.Add("laurel_out", x, gemma4Norm(b, "post_laurel_norm", right, l.Dim, true))
}

// correctOutputScale is AltUp.scale_corrected_output:
// (x.type_as(correct_output_scale) * correct_output_scale).type_as(x);
// the product keeps x when the scale is trained.
func correctOutputScale(b *core.Builder, x core.Value, dim int64) core.Value {
	done := b.Scope("altup")
	w := b.Param("correct_output_scale", []int64{dim}, core.RoleNorm)
	done()
	dt := b.Dtype(x)
	xc := b.Cast(x, b.Prec.Params, "the corrected stream in the scale's dtype (type_as)")
	i := b.AddOp("mul", "correct_output_scale", []core.Value{xc}, w)
	y := b.Out(i, "scaled", b.Shape(xc), b.Dtype(xc), "the corrected active stream times correct_output_scale")
	if b.Trainable(w) {
		b.Save(i, xc)
	}
	b.Op(i).Flops = float64(core.Numel(b.Shape(xc)))
	return b.Cast(y, dt, "the scaled stream cast back (type_as)")
}
