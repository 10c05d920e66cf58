package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Axolotl's Muon example (testdata/README.md names its commit), without
// reinit_weights (refused: a model built from its config) and, for the
// plan, without its fsdp_config: muon() with its AdamW stepping one
// tensor at a time, what Axolotl's Muon does otherwise listed.
func TestAxolotlMuon(t *testing.T) {
	runImportCases(t, []importCase{{
		name:        "Qwen2.5 0.5B, Muon on one GPU",
		file:        "axolotl/qwen2_muon_pretrain_fsdp2.yaml",
		step:        axolotlStep(1, 1, 1, 8192),
		opts:        Options{Overrides: []string{"reinit_weights=null", "fsdp_config=null"}},
		notModelled: []string{axolotlMuonNote},
		hand: `load("@stdlib//llm.star", "qwen2")
plan = train(qwen2("0.5b", attn = "flash"), batch = 1, seq = 8192, precision = "bf16", optimizer = muon(newton_schulz = "reference", impl = "for-loop"),
             clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}})
}

// With its fsdp_config the example is Axolotl's DistMuon, refused at the
// optimizer key.
func TestAxolotlMuonErrors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "axolotl", "qwen2_muon_pretrain_fsdp2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runErrorCases(t, []errorCase{
		{name: "DistMuon under FSDP2", file: "r.yml", config: strings.Replace(string(data), "reinit_weights: true", "reinit_weights: false", 1),
			want:     "r.yml:39: key optimizer: muon with FSDP is Axolotl's DistMuon (contribs/mit/muon/dist_muon.py), which memsh does not replay: it replays Muon on unsharded parameters",
			wantHint: "optimizer: muon without fsdp (data parallel), or adamw_torch_fused with fsdp"},
	})
}
