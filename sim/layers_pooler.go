package sim

import "fmt"

// Pooler is BERT's pooler (transformers/models/bert/modeling_bert.py,
// BertPooler): the first token's hidden state, hidden_states[:, 0], through
// dense(dim, dim, bias=True) and tanh. Its output is [batch, dim].
//
// hidden_states[:, 0] is a strided view, which addmm reads in place: when
// the matmul runs in the stored dtype, autograd saves that view, so the
// whole last hidden state stays alive until the pooler's backward. Under
// autocast the view is first cast to the compute dtype, a new [batch, dim]
// tensor, and that copy is saved instead.
type Pooler struct {
	Name string
	Dim  int64
}

func (p *Pooler) Kind() string      { return "pooler" }
func (p *Pooler) Label() string     { return p.Name }
func (p *Pooler) Children() []Layer { return nil }
func (p *Pooler) Params() int64     { return p.Dim*p.Dim + p.Dim }
func (p *Pooler) Summary() string   { return fmt.Sprintf("first token, %d -> %d, tanh", p.Dim, p.Dim) }
func (p *Pooler) InDim() int64      { return p.Dim }
func (p *Pooler) OutDim() int64     { return p.Dim }
func (p *Pooler) validate(path string) error {
	return positive(path, "dim", p.Dim)
}

func (p *Pooler) lower(b *builder, x Value) Value {
	if b.last(x) != p.Dim {
		panic(shapeMismatch(b, "pooler", p.Dim, b.last(x)))
	}
	name := p.Name
	if name == "" {
		name = "pooler"
	}
	defer b.scope(name)()
	s := b.shape(x)
	n := int64(1)
	if len(s) >= 3 {
		n = numel(s[:len(s)-2])
	}
	first := []int64{n, p.Dim}
	w := b.param("dense.weight", []int64{p.Dim, p.Dim}, "pooler")
	bias := b.param("dense.bias", []int64{p.Dim}, "pooler")
	dt := b.dtype(x)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xin := x // the strided view of the first token shares x's storage
	if b.dtype(x) != dt {
		c := b.addOp("cast", "first_token.to_"+dt.Name(), []Value{x})
		xin = b.out(c, "first_token."+dt.Name(), first, dt, "autocast copy of the first token's hidden state")
	}
	wv := b.weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "dense", ins, w, bias)
	y := b.out(i, "dense", first, dt, "pooler dense output")
	if b.trainable(w) {
		b.save(i, xin)
	}
	if b.grad(xin) {
		b.save(i, wv)
	}
	b.op(i).Flops = 2 * float64(n) * float64(p.Dim) * float64(p.Dim)
	b.op(i).bytes += float64(dt.Bytes(n*p.Dim)) + float64(dt.Bytes(p.Dim*p.Dim))
	return activation(b, "tanh", y)
}
