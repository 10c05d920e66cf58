package sim

import (
	"encoding/json"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// TestRopeTablesSavedAsTransformers: the rotary cos and sin a decoder
// makes once a forward (rotary_emb(hidden_states, position_ids), each
// [1, seq, head_dim] in the model's dtype: the position_ids a forward
// makes itself have one row for the whole batch) and every layer's
// apply_rotary_pos_emb saves (q * cos, rotate_half(q) * sin): one pair
// however many layers and samples (nn.Attention.ropeTables). What
// autograd saves in the whole model, 1 and 2 layers, 64 tokens in bf16
// under SDPA, on the CPU with torch 2.15.0 and transformers 5.25.0:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/FILE.json {1,2} {1,2} 64 bfloat16 sdpa nocache
//
// (with v: two (1, 1, 64, 16) bf16 storages of 2,048 bytes at any depth
// and batch; OLMo 2's are fp32, 8,192 bytes the pair). memsh counts all
// of it but, at batch 1, the 8-byte tail of the shifted labels' storage
// (a (64,) view of 65 elements; at batch 2 the (128,) storage is whole),
// and for Phi-3 one [1, 64, 64] bf16 tensor a layer (8,192
// bytes: o_proj's input, a copy on the CPU because Phi-3's rope ends in
// a torch.cat that leaves q head-major; TestSlidingWindowMask). Without
// the pair memsh kept 4,096 bytes less (OLMo 2: 8,192).
func TestRopeTablesSavedAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file               string
		layers, batch      int64
		measured           int64
		unmodelledPerLayer int64
	}{
		{"llama-gqa-tiny.json", 1, 1, 260_876, 0},
		{"llama-gqa-tiny.json", 2, 1, 418_060, 0},
		{"llama-gqa-tiny.json", 1, 2, 517_636, 0},
		{"mistral-tiny.json", 1, 1, 260_876, 0},
		{"mistral-tiny.json", 2, 1, 418_060, 0},
		{"phi3-tiny.json", 1, 1, 281_356, 8_192},
		{"phi3-tiny.json", 2, 1, 459_020, 8_192},
		{"olmo2-tiny.json", 1, 1, 339_212, 0},
		{"olmo2-tiny.json", 2, 1, 562_444, 0},
		{"olmo2-tiny.json", 1, 2, 670_212, 0},
	} {
		want := tc.measured - tc.layers*tc.unmodelledPerLayer
		if tc.batch == 1 {
			want -= 8 // the labels' tail
		}
		if got := cpuSavedDepth(t, tc.file, tc.layers, tc.batch, 64); got != want {
			t.Errorf("%s, %d layers, batch %d: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.layers, tc.batch, got, want, got-want)
		}
	}
}

// cpuSavedDepth is what a tiny config keeps for backward with
// num_hidden_layers set to layers: bf16, SDPA, transformers 5.25.0, the
// CPU runtime, batch samples of seq tokens.
func cpuSavedDepth(t *testing.T, file string, layers, batch, seq int64) int64 {
	t.Helper()
	m, err := hf.FromConfigOptions(withLayers(t, file, layers), hf.Options{Attn: "sdpa", Transformers: "5.25.0"})
	if err != nil {
		t.Fatal(file, err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), batch, seq
	return evalPlan(t, p).SavedActivations
}

// withLayers is a tiny config with num_hidden_layers set to layers.
func withLayers(t *testing.T, file string, layers int64) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, file), &cfg); err != nil {
		t.Fatal(file, err)
	}
	cfg["num_hidden_layers"] = layers
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
