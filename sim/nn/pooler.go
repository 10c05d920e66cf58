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
//
// Act is the activation after dense ("" = tanh; ModernBERT's
// classification head: classifier_activation, gelu) and NoBias drops
// dense's bias (ModernBERT's classifier_bias false).
type Pooler struct {
	Name      string
	Dim       int64
	InDropout float64
	Act       string
	NoBias    bool
}

func (p *Pooler) Kind() string           { return "pooler" }
func (p *Pooler) Label() string          { return p.Name }
func (p *Pooler) Children() []core.Layer { return nil }
func (p *Pooler) Params() int64 {
	if p.NoBias {
		return p.Dim * p.Dim
	}
	return p.Dim*p.Dim + p.Dim
}
func (p *Pooler) Summary() string {
	return fmt.Sprintf("first token, %d -> %d, %s", p.Dim, p.Dim, p.act())
}
func (p *Pooler) act() string {
	if p.Act == "" {
		return "tanh"
	}
	return p.Act
}
func (p *Pooler) InDim() int64  { return p.Dim }
func (p *Pooler) OutDim() int64 { return p.Dim }
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
	x = b.DropoutOf("dropout", x, first, p.InDropout)
	closeDense := b.Scope("dense")
	if b.LoRAAdapts("pooler") {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "a LoRA adapter on the pooler's dense is not modelled (PEFT adapts it: all-linear, or a target naming it)",
			Hint: "name the modules to adapt, leaving the pooler out: lora(targets=[\"query\", \"value\"]) (PEFT's default for BERT)"}})
	}
	w := b.Param("weight", []int64{p.Dim, p.Dim}, "pooler")
	var bias []int32
	if !p.NoBias {
		bias = append(bias, b.Param("bias", []int64{p.Dim}, "pooler"))
	}
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
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
	i := b.AddOp("matmul", "dense", ins, append([]int32{w}, bias...)...)
	y := b.Out(i, "dense", first, dt, "pooler dense output")
	if b.Trainable(w) {
		b.Save(i, xin)
	}
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(n) * float64(p.Dim) * float64(p.Dim)
	b.Op(i).Bytes += float64(dt.Bytes(n*p.Dim)) + float64(dt.Bytes(p.Dim*p.Dim))
	closeDense()
	return Activation(b, p.act(), y)
}

// MeanPool is ModernBERT's classifier_pooling "mean"
// (ModernBertForSequenceClassification.forward): (hidden_states *
// attention_mask.unsqueeze(-1)).sum(dim=1) / attention_mask.sum(dim=1,
// keepdim=True), over a mask of ones when the batch carries none (no
// padding). The product saves the [batch, seq, 1] bool mask, the
// division its [batch, 1] int64 count; the output is [batch, dim].
// Unnamed, it is no module: its ops run in its parent's forward, as the
// model's own pooling does.
type MeanPool struct {
	Name string
	Dim  int64
}

func (p *MeanPool) Kind() string           { return "mean_pool" }
func (p *MeanPool) Label() string          { return p.Name }
func (p *MeanPool) DefaultName() string    { return "" }
func (p *MeanPool) Children() []core.Layer { return nil }
func (p *MeanPool) Params() int64          { return 0 }
func (p *MeanPool) Summary() string        { return "mean over the sequence" }
func (p *MeanPool) InDim() int64           { return p.Dim }
func (p *MeanPool) OutDim() int64          { return p.Dim }
func (p *MeanPool) Validate(path string) error {
	return core.Positive(path, "dim", p.Dim)
}

func (p *MeanPool) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != p.Dim {
		panic(core.ShapeMismatch(b, "mean_pool", p.Dim, b.Last(x)))
	}
	name := b.ModuleName(p)
	defer b.Scope(name)()
	s := b.Shape(x)
	seq := s[len(s)-2]
	n := core.Rows(s) / seq
	dt := b.Dtype(x)
	m := b.AddOp("ones", "attention_mask", nil)
	mask := b.Out(m, "attention_mask", []int64{n, seq, 1}, units.BOOL, "the mask of ones the head makes without an attention_mask")
	b.Val(mask).Grad = false
	b.Op(m).NoGradB = true
	i := b.AddOp("mul", "masked", []core.Value{x, mask})
	y := b.Out(i, "masked", s, dt, "hidden states times the mask")
	b.Save(i, mask)
	b.Op(i).Flops = float64(core.Numel(s))
	b.Op(i).Bytes += float64(2 * b.Val(x).Bytes)
	j := b.AddOp("sum", "sum", []core.Value{y})
	sum := b.Out(j, "sum", []int64{n, p.Dim}, dt, "the masked hidden states summed over the sequence")
	b.Op(j).Bytes += float64(b.Val(y).Bytes)
	c := b.AddOp("sum", "count", []core.Value{mask})
	count := b.Out(c, "count", []int64{n, 1}, units.INT64, "tokens a sample (attention_mask.sum)")
	b.Val(count).Grad = false
	b.Op(c).NoGradB = true
	k := b.AddOp("div", "mean", []core.Value{sum, count})
	out := b.Out(k, "mean", []int64{n, p.Dim}, dt, "the mean hidden state of each sample")
	b.Save(k, count)
	b.Op(k).Flops = float64(n * p.Dim)
	return out
}
