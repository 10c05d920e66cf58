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
// Kimi_K25VisionEncoderLayer, PixtralAttentionLayer, InternVLVisionLayer): core.BlockPaths lists each, every path is
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
		{"mistral3-tiny.json", "vision_tower.transformer.layers."},
		{"internvl-tiny.json", "vision_tower.encoder.layer."},
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

// TestFSDPIdleTowerUnit: fsdp_units may name a tower the step does not
// run (a vision tower without images, Gemma 4's audio tower always).
// FSDP2 wraps it and never gathers it (its pre-forward never fires; the
// final backward callback's post_backward is a no-op for a group never
// unsharded: replay's holdsIdle), so the step is the same as without the
// unit: the tower's sharded parameters are held either way, and nothing
// is gathered, reduced or kept for it. A name no module has is still
// refused.
func TestFSDPIdleTowerUnit(t *testing.T) {
	image := core.Images{Count: 1, Height: 32, Width: 32}
	for _, tc := range []struct {
		file, tower string
		images      core.Images
	}{
		{"qwen2.5-vl-tiny.json", "model.visual", core.Images{}},
		{"qwen3-vl-tiny.json", "model.visual", core.Images{}},
		{"llama4-vision-tiny.json", "vision_model", core.Images{}},
		{"mllama-tiny.json", "model.vision_model", core.Images{}},
		{"gemma4-vl-tiny.json", "model.vision_tower", core.Images{}},
		{"gemma4-av-tiny.json", "model.audio_tower", core.Images{}},
		{"gemma4-av-tiny.json", "model.audio_tower", image},
		{"kimi-k2.5-tiny.json", "model.vision_tower", core.Images{}},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		p := tinyPlan(t, m)
		p.Images = tc.images
		p.Parallel = core.Parallelism{DP: 2, FSDP: true}
		without := evalPlan(t, p)
		p.Parallel.FSDPUnits = []string{tc.tower}
		with, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Errorf("%s %v: fsdp_units=[%q]: %v", tc.file, tc.images, tc.tower, err)
			continue
		}
		if with.PeakAllocated != without.PeakAllocated || with.PeakReserved != without.PeakReserved || with.States != without.States ||
			with.SavedActivations != without.SavedActivations {
			t.Errorf("%s %v: fsdp_units=[%q] peaks %d, %d, states %+v, saved %d; without the unit %d, %d, %+v, %d", tc.file, tc.images, tc.tower,
				with.PeakAllocated, with.PeakReserved, with.States, with.SavedActivations,
				without.PeakAllocated, without.PeakReserved, without.States, without.SavedActivations)
		}
		p.Parallel.FSDPUnits = []string{tc.tower + "s"}
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "names no module with parameters") {
			t.Errorf("%s: fsdp_units=[%q]: %v, want a refusal", tc.file, tc.tower+"s", err)
		}
	}
}
