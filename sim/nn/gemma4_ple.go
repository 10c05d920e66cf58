package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// gemma4PerLayerKey names Gemma 4's per-layer inputs among the values a
// lowering shares (core.Builder.Share).
const gemma4PerLayerKey = "gemma4.per_layer_inputs"

// Gemma4Embed is Gemma 4's embedding with the per-layer embeddings of its
// small models (E2B, E4B; Gemma4TextModel.get_per_layer_inputs and
// project_per_layer_inputs in transformers' modeling_gemma4.py, 5.17.0),
// which Gemma 3n's text model computes the same way (Gemma3nTextModel,
// modeling_gemma3n.py at 5.25.0, l. 1738-1773; ClampIDs):
//
//	x = embed_tokens(ids) * sqrt(dim)                                   (the residual stream)
//	t = embed_tokens_per_layer(ids) * sqrt(ple)                         [b, s, layers, ple]
//	p = per_layer_projection_norm(per_layer_model_projection(x) * dim^-0.5)
//	per_layer_inputs = (p + t) * 2^-0.5
//
// embed_tokens_per_layer is one table of layers * ple columns; the norm is
// a Gemma4Norm over each layer's ple features. The per-layer inputs are
// left for the decoder layers (Gemma4PerLayer reads its layer's slice, a
// view of them: one storage, alive through the layers).
type Gemma4Embed struct {
	Vocab, Dim int64
	PLEVocab   int64 // vocab_size_per_layer_input
	PLE        int64 // hidden_size_per_layer_input
	Layers     int64
	// ClampIDs: the per-layer lookup reads the token ids with those
	// outside [0, PLEVocab) set to 0 (Gemma 3n's get_per_layer_inputs,
	// torch.where: a new int64 tensor, which the lookup saves); Gemma 4
	// looks the ids up as they are.
	ClampIDs bool
}

func (e *Gemma4Embed) Kind() string                   { return "gemma4_embed" }
func (e *Gemma4Embed) Label() string                  { return "" }
func (e *Gemma4Embed) DefaultName() string            { return "" } // its modules sit in the model
func (e *Gemma4Embed) Children() []core.Layer         { return nil }
func (e *Gemma4Embed) OutDim() int64                  { return e.Dim }
func (e *Gemma4Embed) LookupShape() (rows, dim int64) { return e.Vocab, e.Dim }

func (e *Gemma4Embed) Params() int64 {
	return e.Vocab*e.Dim + e.PLEVocab*e.Layers*e.PLE + e.Dim*e.Layers*e.PLE + e.PLE
}

func (e *Gemma4Embed) Summary() string {
	return fmt.Sprintf("%d x %d, per-layer %d x %d x %d", e.Vocab, e.Dim, e.PLEVocab, e.Layers, e.PLE)
}

func (e *Gemma4Embed) Validate(path string) error {
	for _, f := range []struct {
		what string
		n    int64
	}{{"vocab", e.Vocab}, {"dim", e.Dim}, {"vocab_size_per_layer_input", e.PLEVocab}, {"hidden_size_per_layer_input", e.PLE}, {"layers", e.Layers}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if err := core.CheckVocab(path, "vocab", e.Vocab); err != nil {
		return err
	}
	return core.CheckVocab(path, "vocab_size_per_layer_input", e.PLEVocab)
}

// CheckLayout: the per-layer inputs are made once and read by every
// layer; tensor and pipeline parallelism are not modelled for them.
func (e *Gemma4Embed) CheckLayout(path string, par core.Parallelism) error {
	if par.TP > 1 || par.PP > 1 {
		return &units.Error{Path: path, Msg: "tensor and pipeline parallelism are not modelled for Gemma 4's per-layer embeddings",
			Hint: "use tp=1 and pp=1 (FSDP shards them)"}
	}
	return nil
}

func (e *Gemma4Embed) Lower(b *core.Builder, ids core.Value) core.Value {
	x := (&Embedding{Name: "embed_tokens", Rows: e.Vocab, Dim: e.Dim}).Lower(b, ids)
	// Gemma4TextScaledWordEmbedding (and Gemma 3n's) scale by a 0-dim
	// buffer each, in every release (nn.Buffer, modeling_gemma4.py l. 1429
	// at 5.25.0): Scale.Buffer.
	x = (&Scale{Name: "embed_scale", Factor: math.Sqrt(float64(e.Dim)), In: "embed_tokens", Buffer: true}).Lower(b, x)
	width := e.Layers * e.PLE
	if e.ClampIDs {
		s := b.Shape(ids)
		if b.Dtype(ids) != units.INT64 { // the program's input stands for the ids (Embedding.Lower)
			s = s[:len(s)-1]
		}
		ids = b.Ew("where", "per_layer_input_ids", []core.Value{ids}, s, units.INT64,
			"token ids outside vocab_size_per_layer_input set to 0 (torch.where; saved by the per-layer lookup)")
	}
	t := (&Embedding{Name: "embed_tokens_per_layer", Rows: e.PLEVocab, Dim: width}).Lower(b, ids)
	t = (&Scale{Name: "embed_scale", Factor: math.Sqrt(float64(e.PLE)), In: "embed_tokens_per_layer", Buffer: true}).Lower(b, t)
	p := b.Linear("per_layer_model_projection", core.Role("per_layer_model_projection"), x, e.Dim, width, false)
	p = b.Ew("mul", "per_layer_model_projection_scale", []core.Value{p}, b.Shape(p), b.Dtype(p), "per-layer projection times dim^-0.5")
	p = gemma4Norm(b, "per_layer_projection_norm", p, e.PLE, true)
	s := b.Add("per_layer_inputs_sum", p, t)
	s = b.Ew("mul", "per_layer_input_scale", []core.Value{s}, b.Shape(s), b.Dtype(s), "per-layer inputs ((projection + embedding) * 2^-0.5)")
	b.Share(gemma4PerLayerKey, s)
	return x
}

// Gemma4PerLayer is the per-layer input block at the end of a Gemma 4
// decoder layer with per-layer embeddings (in a residual):
//
//	post_per_layer_input_norm(per_layer_projection(act(per_layer_input_gate(x)) * per_layer_input))
//
// per_layer_input is this layer's slice of Gemma4Embed's per-layer
// inputs, a view: the product keeps the whole tensor (one storage for
// every layer) and the activation's output.
type Gemma4PerLayer struct {
	Dim, PLE int64
	Act      string // the gate's activation ("gelu": gelu_pytorch_tanh)
}

func (g *Gemma4PerLayer) Kind() string           { return "gemma4_per_layer" }
func (g *Gemma4PerLayer) Label() string          { return "" }
func (g *Gemma4PerLayer) DefaultName() string    { return "" } // its modules sit in the decoder layer
func (g *Gemma4PerLayer) Children() []core.Layer { return nil }
func (g *Gemma4PerLayer) InDim() int64           { return g.Dim }
func (g *Gemma4PerLayer) OutDim() int64          { return g.Dim }
func (g *Gemma4PerLayer) Params() int64          { return 2*g.Dim*g.PLE + g.Dim }
func (g *Gemma4PerLayer) Summary() string        { return fmt.Sprintf("%d -> %d -> %d", g.Dim, g.PLE, g.Dim) }

func (g *Gemma4PerLayer) Validate(path string) error {
	if err := core.Positive(path, "dim", g.Dim); err != nil {
		return err
	}
	return core.Positive(path, "hidden_size_per_layer_input", g.PLE)
}

// CheckLayout: see Gemma4Embed.
func (g *Gemma4PerLayer) CheckLayout(path string, par core.Parallelism) error {
	return (&Gemma4Embed{}).CheckLayout(path, par)
}

func (g *Gemma4PerLayer) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != g.Dim {
		panic(core.ShapeMismatch(b, "gemma4_per_layer", g.Dim, b.Last(x)))
	}
	pli, ok := b.SharedValue(gemma4PerLayerKey)
	if !ok {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "a Gemma 4 per-layer input block without the per-layer inputs",
			Hint: "the model's embedding must be Gemma 4's with per-layer embeddings (hf_config builds it)"}})
	}
	gate := b.Linear("per_layer_input_gate", core.Role("per_layer_input_gate"), x, g.Dim, g.PLE, false)
	a := Activation(b, g.Act, gate)
	i := b.AddOp("mul", "per_layer_input", []core.Value{a, pli})
	m := b.Out(i, "per_layer_input", b.Shape(a), b.Dtype(a), "gate times this layer's per-layer input (a view of them)")
	if b.Grad(pli) {
		b.Save(i, a)
	}
	if b.Grad(a) {
		b.Save(i, pli)
	}
	b.Op(i).Flops = float64(core.Numel(b.Shape(a)))
	b.Op(i).Bytes += 2 * float64(b.Val(a).Bytes)
	y := b.Linear("per_layer_projection", core.Role("per_layer_projection"), m, g.PLE, g.Dim, false)
	return gemma4Norm(b, "post_per_layer_input_norm", y, g.Dim, true)
}
