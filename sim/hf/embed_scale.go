package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// gemmaScaleBufferSince is the first transformers release whose Gemma and
// Gemma 2 scale their embeddings by a 0-dim buffer of the embedding
// (GemmaTextScaledWordEmbedding: nn.Buffer(torch.tensor(embed_scale)),
// forward input * embed_scale.to(weight.dtype)): the 5.4.0 wheel; 5.3.0
// and earlier multiply by torch.tensor(hidden_size**0.5,
// dtype=hidden_states.dtype), made on the host, nothing on the device.
// Gemma 3's Gemma3TextScaledWordEmbedding has the buffer in every release
// (register_buffer in 4.57.1, nn.Buffer in 5.25.0), Gemma 4's too.
var gemmaScaleBufferSince = [2]int{5, 4}

// setEmbedScaleBuffer makes the Gemma families' embed_scale a buffer
// where the release holds one (nn.Scale.Buffer).
func setEmbedScaleBuffer(m *core.Model, modelType string, v [2]int) {
	buffer := atLeast(v, gemmaScaleBufferSince)
	switch modelType {
	case "gemma3", "gemma3_text", "gemma4", "gemma4_text":
		buffer = true
	case "gemma", "gemma2":
	default:
		return
	}
	for _, l := range m.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if s, ok := x.(*nn.Scale); ok && s.Name == "embed_scale" {
				s.Buffer = buffer
			}
		})
	}
}
