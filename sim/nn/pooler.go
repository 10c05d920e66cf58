package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Pooler is BERT's pooler (transformers/models/bert/modeling_bert.py,
// BertPooler): the first token's hidden state, hidden_states[:, 0], through
// dense(dim, dim, bias=True) and tanh. Its output is [batch, dim].
//
// hidden_states[:, 0] is a strided view, which addmm reads in place: when
// the matmul runs in the stored dtype, autograd saves that view, so the
// whole last hidden state stays alive until the pooler's backward. Under
// autocast the view is first cast to the compute dtype, a new [batch, dim]
// tensor, and that copy is saved instead.
//
// InDropout is the dropout RoBERTa's classification head
// (RobertaClassificationHead, models/roberta/modeling_roberta.py) runs on
// the first token before dense: a new [batch, dim] tensor and its mask,
// which dense then reads in place of the view (p = 0: the view, as BERT's).
type Pooler struct {
	Name      string
	Dim       int64
	InDropout float64
}

func (p *Pooler) Kind() string           { return "pooler" }
func (p *Pooler) Label() string          { return p.Name }
func (p *Pooler) Children() []core.Layer { return nil }
func (p *Pooler) Params() int64          { return p.Dim*p.Dim + p.Dim }
func (p *Pooler) Summary() string        { return fmt.Sprintf("first token, %d -> %d, tanh", p.Dim, p.Dim) }
func (p *Pooler) InDim() int64           { return p.Dim }
func (p *Pooler) OutDim() int64          { return p.Dim }
func (p *Pooler) Validate(path string) error {
	if p.InDropout < 0 || p.InDropout >= 1 {
		return units.Errorf(path, "dropout probability must be in [0, 1) (got %g)", p.InDropout)
	}
	return core.Positive(path, "dim", p.Dim)
}

func (p *Pooler) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != p.Dim {
		panic(core.ShapeMismatch(b, "pooler", p.Dim, b.Last(x)))
	}
	name := b.ModuleName(p)
	defer b.Scope(name)()
	s := b.Shape(x)
	n := int64(1)
	if len(s) >= 3 {
		n = core.Numel(s[:len(s)-2])
	}
	first := []int64{n, p.Dim}
	w := b.Param("dense.weight", []int64{p.Dim, p.Dim}, "pooler")
	bias := b.Param("dense.bias", []int64{p.Dim}, "pooler")
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	x = b.DropoutOf("dropout", x, first, p.InDropout)
	xin := x // the strided view of the first token shares x's storage
	if b.Dtype(x) != dt {
		c := b.AddOp("cast", "first_token.to_"+dt.Name(), []core.Value{x})
		xin = b.Out(c, "first_token."+dt.Name(), first, dt, "autocast copy of the first token's hidden state")
	}
	wv := b.Weight(w, dt)
	ins := []core.Value{xin}
	if wv != core.NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "dense", ins, w, bias)
	y := b.Out(i, "dense", first, dt, "pooler dense output")
	if b.Trainable(w) {
		b.Save(i, xin)
	}
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(n) * float64(p.Dim) * float64(p.Dim)
	b.Op(i).Bytes += float64(dt.Bytes(n*p.Dim)) + float64(dt.Bytes(p.Dim*p.Dim))
	return Activation(b, "tanh", y)
}
