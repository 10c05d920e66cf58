package models

import (
	"regexp"
	"testing"

	"github.com/memsh/memsh/sim/nn"
)

// TestFieldKeywords: every name a layer builtin gives an nn.Field that is
// a keyword (not a phrase such as "expand x dim") is in its signature.
func TestFieldKeywords(t *testing.T) {
	sigs := map[string]string{}
	for _, b := range ExtraLayerBuiltins() {
		sigs[b.Name] = b.Sig
	}
	keyword := regexp.MustCompile(`^[a-z_0-9]+$`)
	for _, tc := range []struct {
		builtin string
		names   map[nn.Field]string
	}{
		{"mla", mlaKeywords}, {"gated_deltanet", gatedDeltaNetKeywords}, {"mamba", mambaKeywords},
		{"mamba2", mamba2Keywords}, {"vision_tower", visionTowerKeywords}, {"qwen3_vision_tower", qwen3VisionTowerKeywords},
		{"pixtral_vision", pixtralVisionKeywords},
	} {
		sig, ok := sigs[tc.builtin]
		if !ok {
			t.Fatalf("no builtin %s", tc.builtin)
		}
		for f, name := range tc.names {
			if !keyword.MatchString(name) {
				continue
			}
			if !regexp.MustCompile(`[(, ]` + name + `[=,)]`).MatchString(sig) {
				t.Errorf("%s names %q %q, not a keyword of %s", tc.builtin, f, name, sig)
			}
		}
	}
}
