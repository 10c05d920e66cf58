package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// hfLayers is sim/testdata/hf/file with num_hidden_layers set, built with
// opts: the tiny configs tools/oracle/hf_block_saved.py measures a block
// of (two layers minus one).
func hfLayers(t *testing.T, file string, layers int, opts hf.Options) *core.Model {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(readHF(t, file), &raw); err != nil {
		t.Fatal(err)
	}
	raw["num_hidden_layers"] = layers
	js, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(js, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hfBlockSaved is what one layer of file keeps for backward: the saved
// activations of two layers minus one's, batch samples of 16 tokens in
// prec ("bf16": bf16 weights, no autocast, as the oracle's model.to()).
func hfBlockSaved(t *testing.T, file, prec string, batch int64, opts hf.Options) int64 {
	t.Helper()
	var saved [2]int64
	for l := range saved {
		p := tinyPlan(t, hfLayers(t, file, l+1, opts))
		var err error
		if p.Precision, err = core.LookupPrecision(prec); err != nil {
			t.Fatal(err)
		}
		p.Batch, p.Seq = batch, 16
		saved[l] = evalPlan(t, p).SavedActivations
	}
	return saved[1] - saved[0]
}

// BERT's flash-attention 2 path is transformers 5.0's: BertPreTrainedModel
// sets _supports_flash_attn in the 5.0.0 wheel (and 5.17.0, 5.25.0) and
// runs BertSelfAttention through ALL_ATTENTION_FUNCTIONS; 4.57.1's
// BertSelfAttention and BertSdpaSelfAttention have no flash path and
// from_pretrained refuses attn_implementation="flash_attention_2". The
// flash kernel is the one SDPA dispatches to on CUDA for BERT's unmasked
// bidirectional attention (no padding: transformers 5 passes no mask), so
// a block keeps the same tensors under either: q, k, v, the output and
// the logsumexp.
func TestBERTFlashSince(t *testing.T) {
	cfg := readHF(t, "bert-tiny.json")
	for _, tc := range []struct {
		version, attn, err string
	}{
		{"4.57.1", "flash", `transformers 4.57.1 has no flash-attention path for model_type "bert" (from 5.0)`},
		{"4.57.1", "flash_attention_2", `has no flash-attention path`},
		{"4.57.1", "sdpa", ""},
		{"5.0.0", "flash", ""},
		{"5.25.0", "flash", ""},
		{"", "flash_attention_2", ""},
	} {
		_, err := hf.FromConfigOptions(cfg, hf.Options{Attn: tc.attn, Transformers: tc.version})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("transformers %q, attn %q: %v", tc.version, tc.attn, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("transformers %q, attn %q: got %v, want an error containing %q", tc.version, tc.attn, err, tc.err)
		}
	}
	block := func(attn string) int64 {
		return hfBlockSaved(t, "bert-tiny.json", "bf16", 2, hf.Options{Attn: attn})
	}
	if f, s := block("flash"), block("sdpa"); f != s || f <= 0 {
		t.Errorf("a BERT block keeps %d bytes under flash, %d under sdpa; want the same kernel's", f, s)
	}
}
