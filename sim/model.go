package sim

import (
	"fmt"
	"math"
)

// Model is a whole network: layers in order, then (when Vocab is set) an
// output head to the vocabulary, then the loss.
type Model struct {
	Name          string
	Layers        []Layer
	Loss          string // cross_entropy | mse | none
	Vocab         int64  // adds lm_head (dim -> vocab) when > 0
	TieEmbeddings bool   // lm_head shares the first embedding's weight
	HeadBias      bool
	LogitsFP32    bool       // logits upcast to fp32 before the loss (Hugging Face causal LMs)
	LogitSoftcap  float64    // Gemma 2's final_logit_softcapping: logits -> cap * tanh(logits / cap) (softcap.go); 0 = none
	InputDim      int64      // features per position for models that start without an embedding; 0 = inferred
	InputGrad     bool       // the input requires grad (a block measured on its own, as the oracle does)
	Points        int64      // graph models: grid points per sample; the input is [batch, Points, InputDim] (graph_model.go)
	Data          *DataBatch // the data loader's batch the input is built from (data_batch.go); nil: the input is the batch
}

// Params is the exact parameter count: tied weights once, buffers never.
func (m *Model) Params() int64 {
	var n int64
	for _, l := range m.Layers {
		n += l.Params()
	}
	if m.Vocab > 0 {
		if !m.tied() {
			n += m.outDim() * m.Vocab
		}
		if m.HeadBias {
			n += m.Vocab
		}
	}
	return n
}

func (m *Model) tied() bool { return m.TieEmbeddings && m.firstEmbedding() != nil }

func (m *Model) firstEmbedding() *Embedding {
	var found *Embedding
	for _, l := range m.Layers {
		Walk(l, "", func(_ string, x Layer) {
			if e, ok := x.(*Embedding); ok && found == nil {
				found = e
			}
		})
		if found != nil {
			break
		}
	}
	return found
}

// outDim is the width of the last layer's output.
func (m *Model) outDim() int64 {
	for i := len(m.Layers) - 1; i >= 0; i-- {
		if d := widthOut(m.Layers[i]); d > 0 {
			return d
		}
	}
	return 0
}

// widthOut is the output feature count of a layer, 0 when it keeps its input's.
func widthOut(l Layer) int64 {
	switch x := l.(type) {
	case *Linear:
		return x.Out
	case *Embedding:
		return x.Dim
	case *Norm:
		return x.Dim
	case *Attention:
		return x.Dim
	case *MLP:
		return x.Dim
	case *MoE:
		return x.Dim
	case *Sequential:
		for i := len(x.Layers) - 1; i >= 0; i-- {
			if d := widthOut(x.Layers[i]); d > 0 {
				return d
			}
		}
	case *Repeat:
		return widthOut(x.Layer)
	case *Residual:
		return widthOut(x.Layer)
	case interface{ OutDim() int64 }:
		return x.OutDim()
	}
	return 0
}

// widthIn is the input feature count of a layer, 0 when unknown.
func widthIn(l Layer) int64 {
	switch x := l.(type) {
	case *Linear:
		return x.In
	case *Norm:
		return x.Dim
	case *Attention:
		return x.Dim
	case *MLP:
		return x.Dim
	case *MoE:
		return x.Dim
	case *Sequential:
		for _, c := range x.Layers {
			if d := widthIn(c); d > 0 {
				return d
			}
		}
	case *Repeat:
		return widthIn(x.Layer)
	case *Residual:
		return widthIn(x.Layer)
	case interface{ InDim() int64 }:
		return x.InDim()
	}
	return 0
}

func startsWithEmbedding(ls []Layer) bool {
	for len(ls) > 0 {
		switch x := ls[0].(type) {
		case *Embedding:
			return true
		case *Sequential:
			ls = x.Layers
			continue
		}
		return false
	}
	return false
}

// Validate checks every layer and the head.
func (m *Model) Validate() error {
	if len(m.Layers) == 0 {
		return &Error{Path: m.Name, Msg: "model has no layers", Hint: "model(name, embedding(...), repeat(block, n), ...)"}
	}
	for i, l := range m.Layers {
		if err := l.validate(childPath("", l, i)); err != nil {
			return err
		}
	}
	switch m.Loss {
	case "cross_entropy", "mse", "none", "", "crps":
	default:
		return errorf(m.Name, "unknown loss %q (known: cross_entropy, mse, none)", m.Loss)
	}
	if m.Vocab < 0 {
		return errorf(m.Name, "vocab must be positive (got %d)", m.Vocab)
	}
	if err := checkVocab(m.Name, "vocab", m.Vocab); err != nil { // checked.go
		return err
	}
	if !(m.LogitSoftcap >= 0) || math.IsInf(m.LogitSoftcap, 0) {
		return errorf(m.Name, "logit_softcap must be a positive number, or 0 for none (got %g)", m.LogitSoftcap)
	}
	if m.LogitSoftcap > 0 && m.Vocab == 0 {
		return errorf(m.Name, "logit_softcap needs vocab= (it caps the output head's logits)")
	}
	if !startsWithEmbedding(m.Layers) && m.inputDim() <= 0 {
		return &Error{Path: m.Name, Msg: "cannot tell the input width of the first layer", Hint: "pass input_dim= to model()"}
	}
	return nil
}

func (m *Model) inputDim() int64 {
	if m.InputDim > 0 {
		return m.InputDim
	}
	return widthIn(m.Layers[0])
}

// lower emits the model's forward for one micro-batch and returns the loss.
func (m *Model) lower(b *builder) (err error) {
	defer func() {
		if r := recover(); r != nil {
			le, ok := r.(lowerError)
			if !ok {
				panic(r)
			}
			err = le.err
		}
	}()
	var x Value
	if startsWithEmbedding(m.Layers) {
		x = b.input("input_ids", []int64{b.batch, b.seq}, INT64)
		b.p.input = x
	} else {
		dt := b.prec.Compute
		if b.prec.Autocast {
			dt = b.prec.Params // autocast leaves the batch in its own dtype
		}
		shape := []int64{b.batch, b.seq / b.par.spDiv(), m.inputDim()}
		if m.Data != nil {
			x = m.Data.lowerInput(b, shape, dt) // data_batch.go: sets the program input
		} else {
			x = b.input("inputs", shape, dt)
			b.val(x).grad = m.InputGrad && !b.eval
			b.p.input = x
		}
	}
	if m.Data != nil {
		b.p.loss = b.lowerRollout(m, x, b.rollout) // rollout.go: anemoi's rollout loop
		return nil
	}
	x = b.lowerMembers(m, x) // lowerBody once, or once per member (members.go)
	b.p.loss = b.loss(m, x)
	return nil
}

// lowerBody emits the layers and the output head for input x.
func (m *Model) lowerBody(b *builder, x Value) Value {
	for i, l := range m.Layers {
		x = b.lowerChild(l, i, x)
	}
	if m.Vocab > 0 {
		if b.ft.chunkHead(m) { // chunked_loss.go: loss_chunks, returns the loss
			return b.chunkedModelLoss(m, x)
		}
		nParams := len(b.p.params)
		x = b.headLinear(x, m.Vocab, m.HeadBias) // tp.go: vocab-parallel with TP
		if m.tied() {
			for pi := range b.p.params {
				if b.p.params[pi].role == "embed" {
					b.p.params[nParams].tiedTo = int32(pi)
					break
				}
			}
		}
		if m.LogitSoftcap > 0 {
			x = b.softcap("logit_softcap", x) // softcap.go
		}
	}
	return x
}

// input adds the program input (data: no grad).
func (b *builder) input(name string, shape []int64, dt DType) Value {
	b.p.values = append(b.p.values, valueInfo{
		name: name, shape: shape, dtype: dt, bytes: dt.Bytes(numel(shape)),
		cat: CatActivations, producer: -1, why: "input batch",
	})
	return Value(len(b.p.values) - 1)
}

// loss lowers the loss. Cross-entropy: logits optionally upcast to fp32
// (a copy), log_softmax saved for backward (oracle REPORT.md section 4: the
// logits themselves are not kept); backward holds the saved log-probs, the
// dense nll gradient and the logits gradient at once.
func (b *builder) loss(m *Model, x Value) Value {
	if b.ft.chunkHead(m) { // chunked_loss.go: x is the loss already
		return x
	}
	defer b.scope("loss")()
	switch m.Loss {
	case "", "cross_entropy":
		if b.par.megatronCE {
			return b.vocabParallelCE(x) // tp.go
		}
		if m.LogitsFP32 || (b.prec.Autocast && b.dtype(x) != FP32) {
			x = b.cast(x, FP32, "logits upcast to fp32 for the loss")
		}
		i := b.addOp("cross_entropy", "cross_entropy", []Value{x})
		lsm := b.out(i, "log_probs", b.shape(x), b.dtype(x), "log_softmax of the logits (saved by cross-entropy)")
		b.val(lsm).grad = false
		loss := b.out(i, "loss", nil, FP32, "loss")
		b.save(i, lsm)
		b.op(i).workB = b.val(lsm).bytes
		b.op(i).flops = 5 * float64(numel(b.shape(x)))
		return loss
	case "crps":
		return b.crpsLoss(x) // graph_loss.go
	case "mse":
		i := b.addOp("mse_loss", "mse", []Value{x})
		loss := b.out(i, "loss", nil, FP32, "loss")
		b.save(i, x)
		return loss
	default:
		i := b.addOp("sum", "sum", []Value{x})
		return b.out(i, "loss", nil, FP32, "loss")
	}
}

// Describe lists the modules with their parameter counts.
func (m *Model) Describe() []ModuleRow {
	var out []ModuleRow
	for i, l := range m.Layers {
		Walk(l, childPath("", l, i), func(path string, x Layer) {
			out = append(out, ModuleRow{Path: path, Kind: x.Kind(), Summary: x.Summary(), Params: x.Params()})
		})
	}
	if m.Vocab > 0 {
		p := m.outDim() * m.Vocab
		s := fmt.Sprintf("%d -> %d", m.outDim(), m.Vocab)
		if m.tied() {
			p, s = 0, s+" (tied to the embedding)"
		}
		out = append(out, ModuleRow{Path: "lm_head", Kind: "linear", Summary: s, Params: p})
	}
	return out
}

// ModuleRow is one line of Model.Describe.
type ModuleRow struct {
	Path    string
	Kind    string
	Summary string
	Params  int64
}
