package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// LongcatLayer is transformers' LongcatFlashDecoderLayer
// (modular_longcat_flash.py at 5.25.0): two attention sublayers, each
// followed by a dense MLP, and one shortcut-connected MoE that reads the
// first MLP's input and is added at the layer's end:
//
//	h = x + self_attn[0](input_layernorm[0](x))
//	n = post_attention_layernorm[0](h)
//	s = mlp(n)                                   # the MoE
//	h = h + mlps[0](n)
//	h = h + self_attn[1](input_layernorm[1](h))
//	out = h + mlps[1](post_attention_layernorm[1](h)) + s
//
// The sums are out-of-place adds, which save nothing.
type LongcatLayer struct {
	Name string
	Dim  int64
	Attn [2]core.Layer
	MLPs [2]core.Layer
	MoE  core.Layer
}

func (l *LongcatLayer) norms() (in, post [2]core.Layer) {
	for i := range 2 {
		in[i] = &Norm{Name: "input_layernorm." + core.Itoa(int64(i)), Dim: l.Dim, RMS: true}
		post[i] = &Norm{Name: "post_attention_layernorm." + core.Itoa(int64(i)), Dim: l.Dim, RMS: true}
	}
	return in, post
}

func (l *LongcatLayer) Kind() string        { return "longcat_layer" }
func (l *LongcatLayer) Label() string       { return l.Name }
func (l *LongcatLayer) DefaultName() string { return "" }
func (l *LongcatLayer) InDim() int64        { return l.Dim }
func (l *LongcatLayer) OutDim() int64       { return l.Dim }
func (l *LongcatLayer) Children() []core.Layer {
	in, post := l.norms()
	return []core.Layer{in[0], l.Attn[0], post[0], l.MoE, l.MLPs[0], in[1], l.Attn[1], post[1], l.MLPs[1]}
}

func (l *LongcatLayer) Params() int64 {
	var n int64
	for _, c := range l.Children() {
		n += c.Params()
	}
	return n
}

func (l *LongcatLayer) Summary() string {
	return fmt.Sprintf("dim %d, two attentions and MLPs, a shortcut MoE", l.Dim)
}

func (l *LongcatLayer) Validate(path string) error {
	if l.Dim <= 0 {
		return units.Errorf(path, "longcat layer: dim must be positive (got %d)", l.Dim)
	}
	for _, c := range l.Children() {
		if c == nil {
			return units.Errorf(path, "longcat layer: a sublayer is missing")
		}
		if err := c.Validate(core.ChildPath(path, l, c)); err != nil {
			return err
		}
	}
	return nil
}

func (l *LongcatLayer) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != l.Dim {
		panic(core.ShapeMismatch(b, "longcat_layer", l.Dim, b.Last(x)))
	}
	defer b.Scope(l.Name)()
	in, post := l.norms()
	h := b.Add("residual", x, b.LowerChild(l.Attn[0], b.LowerChild(in[0], x)))
	n := b.LowerChild(post[0], h)
	shortcut := b.LowerChild(l.MoE, n)
	h = b.Add("residual", h, b.LowerChild(l.MLPs[0], n))
	h = b.Add("residual", h, b.LowerChild(l.Attn[1], b.LowerChild(in[1], h)))
	h = b.Add("residual", h, b.LowerChild(l.MLPs[1], b.LowerChild(post[1], h)))
	return b.Add("shortcut", h, shortcut)
}
