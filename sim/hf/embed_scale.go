package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// gemmaScaleBufferSince is the first transformers release whose Gemma and
// Gemma 2 scale their embeddings by a 0-dim buffer of the embedding
// (GemmaTextScaledWordEmbedding: nn.Buffer(torch.tensor(embed_scale)),
// forward input * embed_scale.to(weight.dtype)): the 5.4.0 wheel; 5.3.0
// and earlier multiply by torch.tensor(hidden_size**0.5,
// dtype=hidden_states.dtype) in GemmaModel.forward, made on the host,
// nothing on the device. Gemma 3's Gemma3TextScaledWordEmbedding has the
// buffer in every release (register_buffer in 4.57.1, nn.Buffer in
// 5.25.0), Gemma 4's too.
var gemmaScaleBufferSince = [2]int{5, 4}

// gemmaEmbedScale is the Gemma families' embedding normaliser, x
// sqrt(hidden_size), as the scaled embedding embed_tokens runs it with
// its buffer embed_scale (setEmbedScaleBuffer moves it to the model's
// forward for the releases before).
func gemmaEmbedScale(hidden int64) *nn.Scale {
	return &nn.Scale{Name: "embed_scale", Factor: math.Sqrt(float64(hidden)), In: "embed_tokens", Buffer: true}
}

// setEmbedScaleBuffer makes Gemma's and Gemma 2's embedding scale (the
// only scale with a buffer) a host tensor multiplied in the model's
// forward where release v is older than gemmaScaleBufferSince.
func setEmbedScaleBuffer(m *core.Model, modelType string, v [2]int) {
	if modelType != "gemma" && modelType != "gemma2" || atLeast(v, gemmaScaleBufferSince) {
		return
	}
	for _, l := range m.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if s, ok := x.(*nn.Scale); ok && s.Buffer {
				s.Buffer, s.In = false, ""
			}
		})
	}
}
