package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestTrainablePatterns: train(trainable=) trains only the parameters a
// pattern matches from the name's start (Axolotl's unfrozen_parameters,
// re.match), on the small Llama (hidden 512, 2 layers of 2,769,920
// parameters: q and o 512 x 512 each, k and v 512 x 128 each (2 of 8
// heads), the MLP 3 x 512 x 1,376, two norms of 512; embed_tokens and
// lm_head 32,000 x 512 = 16,384,000 each, untied): a frozen layer 0
// saves nothing for backward (its weights get no gradient and its input
// requires none), layer 1 trains as before.
func TestTrainablePatterns(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	for _, tc := range []struct {
		name      string
		patterns  []string
		trainable int64
		layer0    bool // layer 0's ops save tensors
	}{
		{"all", nil, 2*2_769_920 + 512 + 2*16_384_000, true},
		{"layer 1", []string{`layers\.1\.`}, 2_769_920, false},
		{"layer 1 and the head", []string{`layers\.1\.`, "lm_head"}, 2_769_920 + 16_384_000, false},
		{"from the start only", []string{"self_attn", "layers.1.mlp"}, 3 * 512 * 1376, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testmodels.LlamaPlan(m, 1, 256, "bf16", "none", "H100-80GB")
			p.Trainable = tc.patterns
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, pi := range prog.Params {
				if pi.Trainable && pi.TiedTo < 0 {
					n += pi.Numel
				}
			}
			if n != tc.trainable {
				t.Errorf("%d trainable parameters, want %d", n, tc.trainable)
			}
			saves := false
			for _, op := range prog.Ops {
				if strings.HasPrefix(op.Name, "layers.0.") && len(op.Saved) > 0 {
					saves = true
				}
			}
			if saves != tc.layer0 {
				t.Errorf("layer 0 saves tensors: %v, want %v", saves, tc.layer0)
			}
		})
	}
}

// TestTrainableRefused: a pattern RE2 does not read, trainable= beside
// lora=, and patterns that leave nothing to train are errors.
func TestTrainableRefused(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	for _, tc := range []struct {
		name     string
		patterns []string
		lora     bool
		want     string
	}{
		{"lookahead", []string{`layers(?=\.1)`}, false, "not a regular expression memsh reads"},
		{"empty", []string{""}, false, "must not be empty"},
		{"with lora", []string{"lm_head"}, true, "lora= freezes the whole base already"},
		{"nothing", []string{"model.layers"}, false, "leaves nothing to train"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testmodels.LlamaPlan(m, 1, 256, "bf16", "none", "H100-80GB")
			p.Trainable = tc.patterns
			if tc.lora {
				p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj"}}
			}
			_, err := Evaluate(p, core.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
