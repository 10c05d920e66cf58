package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// ShortConv is Liquid AI's gated short convolution, the "conv" layers of
// LFM2 and LFM2-MoE as transformers builds them (Lfm2ShortConv,
// models/lfm2/modeling_lfm2.py at 5.25.0):
//
//	BCx = in_proj(h).transpose(-1, -2)      # [batch, 3 x hidden, seq]
//	B, C, x = BCx.chunk(3, dim=-2)          # views of in_proj's output
//	u = B * x                               # saves B and x: in_proj's output stays
//	u = causal_conv1d_fn(u, conv.weight)    # depthwise, ConvK taps, no activation
//	y = (C * u).transpose(-1, -2).contiguous()
//	out_proj(y)                             # saves its contiguous input
//
// The conv runs transformers' own causal_conv1d_fn, F.conv1d with padding
// ConvK - 1 then [:, :, :seq]: conv1d saves its input u, and the slice is
// a view of the padded output, which C * u saves, so seq + ConvK - 1
// positions a sequence stay. That is what a GPU user gets by default:
// transformers calls the causal-conv1d package's kernel instead only when
// that package is installed (use_kernel_func_from_hub_with_fallback,
// integrations/hub_kernels.py; "falling back to its reference PyTorch
// implementation" otherwise), and none of LFM2's model cards ask for it.
// Its CausalConv1dFn would save the same input and return an unpadded
// output (Dao-AILab/causal-conv1d, causal_conv1d_interface.py): ConvK - 1
// positions a sequence fewer, not modelled.
//
// Like a Mamba layer, the layer keeps nothing [seq, seq] and its state
// is ConvK - 1 positions a sequence.
type ShortConv struct {
	Name  string
	Dim   int64 // hidden_size
	ConvK int64 // conv_L_cache
	Bias  bool  // conv_bias: in_proj, the conv and out_proj
}

func (m *ShortConv) Kind() string           { return "short_conv" }
func (m *ShortConv) Label() string          { return m.Name }
func (m *ShortConv) DefaultName() string    { return "conv" }
func (m *ShortConv) Children() []core.Layer { return nil }
func (m *ShortConv) InDim() int64           { return m.Dim }
func (m *ShortConv) OutDim() int64          { return m.Dim }

// Params: in_proj (3 x hidden outputs), the depthwise conv and out_proj,
// each with a bias under conv_bias.
func (m *ShortConv) Params() int64 {
	n := 3*m.Dim*m.Dim + m.Dim*m.ConvK + m.Dim*m.Dim
	if m.Bias {
		n += 3*m.Dim + m.Dim + m.Dim
	}
	return n
}

func (m *ShortConv) Summary() string {
	return fmt.Sprintf("dim %d, conv %d", m.Dim, m.ConvK)
}

func (m *ShortConv) Validate(path string) error {
	return checkPositive(path, sized{FieldDim, m.Dim}, sized{FieldConvKernel, m.ConvK})
}

// CheckLayout: tensor and context parallelism of the conv layers are not
// modelled (under cp each rank's conv would lack the ConvK - 1 positions
// before its tokens).
func (m *ShortConv) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "short convolution", "each rank's conv would miss the tokens before its own")
}

func (m *ShortConv) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "short_conv", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	s := b.Shape(x)
	T, seq, batch := sequences(s)
	bcx := b.Linear("in_proj", core.RoleLinear, x, m.Dim, 3*m.Dim, m.Bias)
	dt := b.Dtype(bcx)
	per := core.WithLast(s, m.Dim)

	// B * x: both views of in_proj's output, which the product saves.
	gi := b.AddOp("mul", "Bx", []core.Value{bcx})
	u := b.Out(gi, "Bx", per, dt, "B * x, the conv's input (saved by the conv)")
	b.Save(gi, bcx)
	b.Op(gi).Flops = float64(T * m.Dim)

	done := b.Scope("conv")
	ps := []int32{b.Param("weight", []int64{m.Dim, 1, m.ConvK}, core.RoleLinear)}
	if m.Bias {
		ps = append(ps, b.Param("bias", []int64{m.Dim}, core.RoleLinear))
	}
	done()
	ci := b.AddOp("conv1d", "conv", []core.Value{u}, ps...)
	padded := b.Out(ci, "conv_padded", []int64{batch, m.Dim, seq + m.ConvK - 1}, dt,
		"F.conv1d's output with ConvK - 1 padding; the conv's [:, :, :seq] is a view of it (saved by C * conv)")
	b.Save(ci, u)
	// F.conv1d computes every padded position: seq + ConvK - 1 a sequence
	// (FlopCounterMode counts them, TestFLOPsAgainstTorch).
	b.Op(ci).Flops = 2 * float64(batch*(seq+m.ConvK-1)) * float64(m.Dim*m.ConvK)

	// C * conv: C a view of in_proj's output, conv a view of the padded
	// output; each saved.
	yi := b.AddOp("mul", "Cy", []core.Value{bcx, padded})
	y := b.Out(yi, "Cy", per, dt, "C * conv, before transpose(-1, -2).contiguous()")
	b.Save(yi, bcx, padded)
	b.Op(yi).Flops = float64(T * m.Dim)

	yc := b.Ew("copy", "out_proj_input", []core.Value{y}, per, dt, "y.transpose(-1, -2).contiguous(), out_proj's input (saved)")
	return b.Linear("out_proj", core.RoleLinear, yc, m.Dim, m.Dim, m.Bias)
}
