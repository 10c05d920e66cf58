package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// RecurrentBlock is Griffin's and RecurrentGemma's recurrent block
// (RecurrentGemmaRecurrentBlock with its RG-LRU, RecurrentGemmaRglru,
// models/recurrent_gemma/modeling_recurrent_gemma.py at 5.25.0) as
// transformers trains it, use_cache=False: PyTorch ops and a Python loop
// over the tokens, no kernel.
//
//	y = act(linear_y(x))                                keeps linear_y's output (gelu_tanh)
//	a = conv_1d(linear_x(x))[..., :seq]                 depthwise, padded by width - 1: keeps its input
//	i, r = sigmoid(baddbmm(a, input_gate)), sigmoid(baddbmm(a, recurrent_gate))
//	                                                    a reshaped (a copy) and kept; each sigmoid its output
//	l = -8 r * softplus(recurrent_param)                keeps -8 r and the softplus
//	A, A² = exp(l), exp(2 l)                            each keeps its output
//	u = (a * i) * (reset + ~reset * sqrt(1 - A²))       sqrt keeps 1 - A², the products their operands, each ~reset a bool
//	h_t = (A * ~reset)_t * h_{t-1} + u_t                the loop, in fp32 (below)
//	out = linear_out(h * y)
//
// The loop (_rnn_scan) keeps, for every token, the fp32 state h_{t-1}
// ([batch, lru_width], the first zeros) and the gate's step: in fp32 a
// view of A * ~reset (its whole storage once), in 16 bits an fp32 copy of
// each step but the first (the first multiplies zeros that need no
// gradient). Those are one saved value each here, of the steps' summed
// bytes. Not modelled: the module attributes that keep the last state
// and conv state after the forward (recurrent_states, conv1d_state: a
// [batch, lru_width] fp32 tensor a layer, out of autograd). Under
// autocast the RG-LRU's ops run in lists of their own (baddbmm in the
// compute dtype, exp and softplus in fp32): refused.
type RecurrentBlock struct {
	Name         string
	Dim, Width   int64  // hidden_size, lru_width
	Heads, ConvK int64  // num_attention_heads (the gates' blocks), conv1d_width
	Act          string // linear_y's activation (hidden_activation: gelu_pytorch_tanh, one aten::gelu)
}

func (r *RecurrentBlock) Kind() string           { return "recurrent_block" }
func (r *RecurrentBlock) Label() string          { return r.Name }
func (r *RecurrentBlock) DefaultName() string    { return "temporal_block" }
func (r *RecurrentBlock) Children() []core.Layer { return nil }
func (r *RecurrentBlock) InDim() int64           { return r.Dim }
func (r *RecurrentBlock) OutDim() int64          { return r.Dim }

// Params: linear_y, linear_x, linear_out (biased), conv_1d (weight and
// bias), the RG-LRU's recurrent_param and its two block-diagonal gates.
func (r *RecurrentBlock) Params() int64 {
	w, bw := r.Width, r.Width/max(r.Heads, 1)
	return 2*(r.Dim*w+w) + w*r.Dim + r.Dim + w*r.ConvK + w + w + 2*(r.Heads*bw*bw+r.Heads*bw)
}

func (r *RecurrentBlock) Summary() string {
	return fmt.Sprintf("%d -> lru %d in %d blocks, conv %d", r.Dim, r.Width, r.Heads, r.ConvK)
}

func (r *RecurrentBlock) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, r.Dim}, sized{FieldInner, r.Width}, sized{FieldHeads, r.Heads}, sized{FieldConvKernel, r.ConvK}); err != nil {
		return err
	}
	if r.Width%r.Heads != 0 {
		return units.Errorf(path, "heads (%d) must divide the recurrence's width (%d): its gates are one block a head", r.Heads, r.Width)
	}
	return nil
}

// CheckLayout: the recurrence is not split across ranks.
func (r *RecurrentBlock) CheckLayout(path string, par core.Parallelism) error {
	if par.TP > 1 || par.CP > 1 {
		return &units.Error{Path: path, Msg: "tensor and context parallelism are not modelled for RecurrentGemma's recurrent blocks", Hint: "use tp=1 and cp=1"}
	}
	return nil
}

func (r *RecurrentBlock) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != r.Dim {
		panic(core.ShapeMismatch(b, "recurrent_block", r.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(r))()
	if b.Prec.Autocast {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "RecurrentGemma's recurrent block is not modelled under autocast (its RG-LRU's baddbmm, exp and softplus run in autocast's own dtypes)",
			Hint: "train in bf16 or fp32 (precision=\"bf16\" or \"fp32\")"}})
	}
	s, dt, w := b.Shape(x), b.Dtype(x), r.Width
	rows := core.Rows(s)
	seq := s[len(s)-2]
	ws := core.WithLast(s, w)
	y := Activation(b, r.Act, b.Linear("linear_y", core.RoleGate, x, r.Dim, w, true))
	xl := b.Linear("linear_x", core.RoleUp, x, r.Dim, w, true)
	a := r.conv(b, xl, s)

	done := b.Scope("rg_lru")
	flat := b.Ew("reshape", "reshape_act", []core.Value{a}, ws, dt, "the conv's output reshaped into the gates' blocks (a copy: a strided view)")
	ig := r.gate(b, "input_gate", flat, ws)
	rg := r.gate(b, "recurrent_gate", flat, ws)
	p := b.Param("recurrent_param", []int64{w}, core.Role("rg_lru"))
	sp := b.AddOp("softplus", "softplus", nil, p)
	spv := b.Out(sp, "softplus", []int64{w}, dt, "softplus(recurrent_param)")
	neg := b.Ew("mul", "neg8_gate", []core.Value{rg}, ws, dt, "-8 times the recurrent gate")
	l := b.AddOp("mul", "log_recurrent_gate", []core.Value{neg, spv})
	lv := b.Out(l, "log_recurrent_gate", ws, dt, "log of the recurrence's A")
	b.Save(l, neg, spv)
	A := b.Unary("exp", lv, false, true)
	A2 := b.Unary("exp", b.Ew("mul", "twice_log", []core.Value{lv}, ws, dt, "2 x log A"), false, true)
	gated := r.mul(b, "gated_inputs", a, ig, ws, dt)
	om := b.Ew("rsub", "one_minus_a_square", []core.Value{A2}, ws, dt, "1 - A²")
	sq := b.AddOp("sqrt", "multiplier", []core.Value{om}) // SqrtBoundDerivative: keeps its input
	sqv := b.Out(sq, "multiplier", ws, dt, "sqrt(1 - A²)")
	b.Save(sq, om)
	reset := b.AddOp("eq", "reset", nil)
	rv := b.Out(reset, "reset", []int64{1, seq, 1}, units.BOOL, "position_ids == 0: where a document starts")
	notReset := func(name string) core.Value {
		i := b.AddOp("not", name, []core.Value{rv})
		return b.Out(i, name, []int64{1, seq, 1}, units.BOOL, "~reset (a new bool tensor, kept by the product)")
	}
	m := b.AddOp("mul", "not_reset_multiplier", []core.Value{notReset("not_reset"), sqv})
	mv := b.Out(m, "not_reset_multiplier", ws, dt, "~reset * sqrt(1 - A²)")
	b.Save(m, b.Op(m).In[0])
	mult := b.Ew("add", "multiplier_reset", []core.Value{rv, mv}, ws, dt, "reset + ~reset * sqrt(1 - A²)")
	nx := r.mul(b, "normalized_x", gated, mult, ws, dt)
	g := b.AddOp("mul", "recurrent_gate_reset", []core.Value{A, notReset("not_reset_scan")})
	gv := b.Out(g, "recurrent_gate_reset", ws, dt, "A * ~reset")
	b.Save(g, b.Op(g).In[1])
	h := r.scan(b, nx, gv, ws, rows, seq)
	done()

	hy := r.mul(b, "x_times_y", h, y, ws, dt)
	return b.Linear("linear_out", core.RoleDown, hy, w, r.Dim, true)
}

// conv is conv_1d over linear_x's output (transposed to [batch, width,
// seq], a view): a depthwise Conv1d padded by width - 1 on both sides,
// [batch, width, seq + width - 1], cut to seq (a view, the RG-LRU's
// input); it keeps its input.
func (r *RecurrentBlock) conv(b *core.Builder, x core.Value, s []int64) core.Value {
	defer b.Scope("conv_1d")()
	w, k := r.Width, r.ConvK
	wt := b.Param("weight", []int64{w, 1, k}, core.Role("conv_1d"))
	bias := b.Param("bias", []int64{w}, core.Role("conv_1d"))
	i := b.AddOp("conv1d", "", []core.Value{x}, wt, bias)
	out := core.WithLast(s, w)
	out[len(out)-2] += k - 1
	y := b.Out(i, "out", out, b.Dtype(x), "the depthwise conv's output, width - 1 tokens longer (cut to seq: a view)")
	if b.Trainable(wt) {
		b.Save(i, x)
	}
	b.Op(i).Flops = 2 * float64(core.Rows(s)*w*k)
	return y
}

// gate is sigmoid(baddbmm(bias, x, weight)): the batched product keeps
// x, its output is reshaped (a copy) and the sigmoid keeps its output.
func (r *RecurrentBlock) gate(b *core.Builder, name string, x core.Value, shape []int64) core.Value {
	bw := r.Width / r.Heads
	wt := b.Param(name+"_weight", []int64{r.Heads, bw, bw}, core.Role("rg_lru"))
	bias := b.Param(name+"_bias", []int64{r.Heads, bw}, core.Role("rg_lru"))
	dt := b.Dtype(x)
	i := b.AddOp("baddbmm", name, []core.Value{x}, wt, bias)
	y := b.Out(i, name, shape, dt, name+"'s block-diagonal product")
	if b.Trainable(wt) {
		b.Save(i, x)
	}
	b.Op(i).Flops = 2 * float64(core.Rows(shape)*r.Width*bw)
	y = b.Ew("reshape", name+"_reshape", []core.Value{y}, shape, dt, name+"'s product back to [batch, seq, width] (a copy)")
	return b.Unary("sigmoid", y, false, true)
}

// mul is x * y, each kept for the other's gradient.
func (r *RecurrentBlock) mul(b *core.Builder, name string, x, y core.Value, shape []int64, dt units.DType) core.Value {
	i := b.AddOp("mul", name, []core.Value{x, y})
	v := b.Out(i, name, shape, dt, name)
	if b.Grad(y) {
		b.Save(i, x)
	}
	if b.Grad(x) {
		b.Save(i, y)
	}
	b.Op(i).Flops = float64(core.Numel(shape))
	return v
}

// scan is _rnn_scan's loop over the tokens: what it keeps is the fp32
// states and the gate's steps (see RecurrentBlock); its output is the
// zeros_like tensor each step writes into ([:, t] = ..., CopySlices).
func (r *RecurrentBlock) scan(b *core.Builder, x, gate core.Value, shape []int64, rows, seq int64) core.Value {
	dt := b.Dtype(x)
	i := b.AddOp("rnn_scan", "rnn_scan", []core.Value{x, gate})
	h := b.Out(i, "contextualized_states", shape, dt, "the recurrence's outputs, written a token at a time")
	states := b.Out(i, "recurrent_states", core.WithLast(shape, r.Width), units.FP32, "the fp32 state before each token (the first zeros), one [batch, lru_width] tensor a token, kept by the next step's product")
	b.Val(states).Grad = false
	saved := []core.Value{states}
	if dt == units.FP32 {
		saved = append(saved, gate) // its steps are views of it
	} else if seq > 1 {
		gs := core.WithLast(shape, r.Width)
		gs[len(gs)-2] = seq - 1
		c := b.Out(i, "gate_steps_fp32", gs, units.FP32, "each step's gate but the first, copied to fp32 (.type(acc_dtype)) and kept by its product")
		b.Val(c).Grad = false
		saved = append(saved, c)
	}
	b.Save(i, saved...)
	b.Op(i).Flops = 3 * float64(rows*r.Width)
	return h
}
