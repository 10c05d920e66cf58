package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// TestEagerMaskOnceAForward: under eager attention transformers 5.25.0
// builds one float mask a forward (masking_utils' create_causal_mask) and
// hands it to every layer, which adds it to its scores: at batch 2 x 64
// tokens a (2, 1, 64, 64) bf16 tensor of 16,384 bytes, the same tensor in
// both layers (a forward pre-hook on each decoder layer, bf16, torch
// 2.15.0: kwargs attention_mask, or the 4-D tensor argument GPT2Block
// takes; under SDPA it is None), for Llama, OLMo 2, GLM-4.5, Qwen3-Next,
// GPT-NeoX, Falcon and GPT-2 alike; Gemma 4 (gemma4-tiny, 4 layers) makes
// one for its sliding layers and one for its full ones, two storages. The add saves nothing, so without
// checkpointing the saved bytes do not change (TestSlidingWindowMask's
// eager rows and TestGemmaNormSavesAsTransformers hold them exact); under
// full checkpointing the mask is every checkpointed layer's argument and
// the step holds it into the backward: one storage, whatever the depth (2
// and 3 layers here; a weakref to it lives after a checkpointed forward of
// llama-gqa-tiny at 1 and 2 layers, and is dead without checkpointing),
// one layer too: the model's forward makes it before the layer loop,
// outside every checkpoint (core.OutsideRegions).
func TestEagerMaskOnceAForward(t *testing.T) {
	full, err := core.ParseCheckpoint("full")
	if err != nil {
		t.Fatal(err)
	}
	glm := map[string]any{"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "first_k_dense_replace": 2,
		"n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "num_attention_heads": 4,
		"num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256}
	neox := map[string]any{"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 256}
	gpt2 := map[string]any{"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 256}
	everyFull := map[string]any{"full_attention_interval": 1, "mlp_only_layers": []any{}}
	for _, tc := range []struct {
		file       string
		set        map[string]any
		layers     int64
		checkpoint bool
		more       int64 // saved bytes the mask adds
	}{
		{"llama-gqa-tiny.json", nil, 1, false, 0},
		{"llama-gqa-tiny.json", nil, 2, false, 0},
		{"llama-gqa-tiny.json", nil, 1, true, 16_384},
		{"llama-gqa-tiny.json", nil, 2, true, 16_384},
		{"llama-gqa-tiny.json", nil, 3, true, 16_384},
		{"olmo2-tiny.json", nil, 2, false, 0},
		{"olmo2-tiny.json", nil, 1, true, 16_384},
		{"olmo2-tiny.json", nil, 2, true, 16_384},
		{"glm-4.5-air.json", glm, 2, true, 16_384},
		{"qwen3-next-tiny.json", everyFull, 2, true, 16_384},
		{"pythia-160m.json", neox, 2, false, 0},
		{"pythia-160m.json", neox, 2, true, 16_384},
		{"falcon-tiny.json", nil, 2, true, 16_384},
		{"gpt2.json", gpt2, 2, false, 0},
		{"gpt2.json", gpt2, 2, true, 16_384},
		// Gemma 4: one mask a layer type (sliding and full: two storages,
		// the window of 512 holding all 64 tokens)
		{"gemma4-tiny.json", nil, 4, false, 0},
		{"gemma4-tiny.json", nil, 4, true, 2 * 16_384},
	} {
		saved := func(mask bool) int64 {
			m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, tc.layers, tc.set), hf.Options{Attn: "eager", Transformers: "5.25.0"})
			if err != nil {
				t.Fatal(tc.file, err)
			}
			if !mask {
				for _, l := range m.Layers {
					clearEagerMask(l)
				}
			}
			p := tinyPlan(t, m)
			p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 64
			if tc.checkpoint {
				p.Checkpoint = full
			}
			return evalPlan(t, p).SavedActivations
		}
		if got := saved(true) - saved(false); got != tc.more {
			t.Errorf("%s, %d layers, checkpoint %v: the mask adds %d saved bytes, want %d", tc.file, tc.layers, tc.checkpoint, got, tc.more)
		}
	}
}

// clearEagerMask clears EagerMask on every attention of l: the lowering
// without the mask that hf_config sets.
func clearEagerMask(l core.Layer) {
	switch a := l.(type) {
	case *nn.Attention:
		a.EagerMask = false
	case *nn.Gemma4Attention:
		a.EagerMask = false
	}
	for _, c := range l.Children() {
		clearEagerMask(c)
	}
}
