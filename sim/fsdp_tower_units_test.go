package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestFSDPTowerUnits: FSDP wraps a vision-language model's vision blocks
// as units beside its decoder layers, as transformers' _no_split_modules
// lists them (Qwen2_5_VLVisionBlock, Qwen3VLVisionBlock,
// Llama4VisionEncoderLayer, MllamaVisionEncoderLayer,
// Gemma4VisionPatchEmbedder, Gemma4VisionEncoderLayer, Gemma4AudioLayer,
// Kimi_K25VisionEncoderLayer): core.BlockPaths lists each, every path is
// a module holding parameters of the lowered program, and every
// parameter of a tower layer falls under one of them, so none is left in
// the root unit, gathered for the whole step.
func TestFSDPTowerUnits(t *testing.T) {
	for _, tc := range []struct {
		file  string
		tower string // a parameter path part only a tower's layers have
	}{
		{"qwen2.5-vl-tiny.json", ".blocks."},
		{"qwen3-vl-tiny.json", ".blocks."},
		{"qwen3.5-vl-tiny.json", ".blocks."},
		{"llama4-vision-tiny.json", "vision_model.model.layers."},
		{"mllama-tiny.json", "transformer.layers."},
		{"gemma4-vl-tiny.json", "vision_tower.encoder.layers."},
		{"gemma4-av-tiny.json", "audio_tower.layers."},
		{"kimi-k2.5-tiny.json", "vision_tower.layers."},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		paths := core.BlockPaths(m)
		held := map[string]bool{}
		for _, path := range paths {
			for _, p := range prog.Params {
				if strings.HasPrefix(p.Name, path+".") {
					held[path] = true
					break
				}
			}
			if !held[path] {
				t.Errorf("%s: block %q holds no parameter", tc.file, path)
			}
		}
		towerParams := 0
		for _, p := range prog.Params {
			if !strings.Contains(p.Name, tc.tower) {
				continue
			}
			towerParams++
			in := false
			for _, path := range paths {
				if strings.HasPrefix(p.Name, path+".") {
					in = true
					break
				}
			}
			if !in {
				t.Errorf("%s: %s is in no listed block (the root unit)", tc.file, p.Name)
			}
		}
		if towerParams == 0 {
			t.Errorf("%s: no parameter has %q: the test reads the wrong names", tc.file, tc.tower)
		}
	}
}
