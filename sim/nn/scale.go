package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Scale multiplies its input by a constant: Gemma's embedding normaliser,
// hidden_states * sqrt(hidden_size) (transformers/models/gemma/
// modeling_gemma.py, GemmaModel.forward). The factor is a 0-dim tensor
// made on the host (torch.tensor(..., dtype=hidden_states.dtype)), so the
// product's backward keeps nothing on the device; the output is a new
// tensor of the input's shape and dtype. Granite's muP multipliers
// (embedding_multiplier, residual_multiplier) multiply by a Python float,
// which saves nothing either.
//
// A Scale is no module of its own: transformers computes each of these
// inline in a forward (GraniteDecoderLayer.forward: hidden_states *
// self.residual_multiplier), so the product runs in the module of the
// layer the Scale is a child of, or in its child In.
type Scale struct {
	Name   string // the product's name, in the module that runs it ("scale" if empty)
	Factor float64
	// In: the child module whose forward runs the product ("" the
	// parent's own): Gemma3TextScaledWordEmbedding's embed_scale is
	// in embed_tokens' forward, Falcon-H1's ssm_in_multiplier in the
	// mamba mixer's (FalconH1Mixer.forward).
	In string
	// Rebinds: the forward rebinds the local holding the token
	// embedding's output to the product (Granite: inputs_embeds =
	// inputs_embeds * embedding_multiplier), so the product is what the
	// model holds through its layers (core.Model.HoldsEmbedding) and the
	// lookup's output dies here.
	Rebinds bool
	// Buffer: the factor is a 0-dim buffer of the embedding module In in
	// the parameters' dtype (Gemma3TextScaledWordEmbedding's embed_scale,
	// the scaled embeddings of Gemma and Gemma 2 from transformers 5.4,
	// Gemma 4's: input * embed_scale.to(weight.dtype), that cast a
	// no-op), on the device with the parameters; the product's backward
	// keeps the buffer itself, nothing new.
	Buffer bool
}

func (s *Scale) Kind() string           { return "scale" }
func (s *Scale) Label() string          { return "" }
func (s *Scale) DefaultName() string    { return "" } // runs in its parent's module (or In)
func (s *Scale) Children() []core.Layer { return nil }
func (s *Scale) Params() int64          { return 0 }
func (s *Scale) Summary() string        { return fmt.Sprintf("x %g", s.Factor) }
func (s *Scale) Validate(path string) error {
	if !(s.Factor > 0) {
		return units.Errorf(path, "scale factor must be positive (got %g)", s.Factor)
	}
	return nil
}

func (s *Scale) Lower(b *core.Builder, x core.Value) core.Value {
	defer b.Scope(s.In)()
	name := s.Name
	if name == "" {
		name = s.Kind()
	}
	if s.Buffer {
		b.Buffer(name, []int64{}, b.Prec.Params, "the embedding's 0-dim scale (embed_scale)")
	}
	i := b.AddOp("mul", name, []core.Value{x})
	y := b.Out(i, name, b.Shape(x), b.Dtype(x), "scaled "+b.LastName(x))
	b.Op(i).Flops = float64(core.Numel(b.Shape(x)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	if s.Rebinds {
		b.RebindEmbeddingOutput(x, y)
	}
	return y
}
