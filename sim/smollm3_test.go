package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// SmolLM3's parameter count: the hub's safetensors index of
// HuggingFaceTB/SmolLM3-3B (total_parameters 3,075,098,624, its head
// tied; public model lists quote the same for -3B-Base), which
// transformers 5.25.0 also counts on the meta device for smollm3-3b.json
// (torch 2.15.0, /work/venv-t; its sizes the card's: 36 layers of 16
// heads, 4 kv heads, hidden 2048, intermediate 11008, vocab 128,256, NoPE
// every 4th layer); smollm3-tiny.json 90,432.
func TestSmolLM3Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"smollm3-3b.json":   3_075_098_624,
		"smollm3-tiny.json": 90_432,
	})
}

// What SmolLM3 keeps for backward, against transformers 5.25.0 on PyTorch
// 2.15.0 (the CPU, no autocast): smollm3-tiny.json (64 wide, 4 heads of
// 16, 2 kv heads, intermediate 128, vocab 256, tied, no_rope_layer_interval
// 2: the second layer has no rope), and smollm3-tiny-w16.json, the same
// with use_sliding_window and a 16-token window (SmolLM3Config makes the
// NoPE layer the sliding one), 2 samples of 32 tokens, 1 and 2 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/smollm3-tiny{,-w16}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Under sdpa the sliding layer keeps 24,576 (fp32) and 12,288 (bf16)
// bytes more than a full one, as memsh lowers a windowed SDPA layer for
// the other families (sim/sliding_window_sdpa_test.go); rope or none, a
// layer keeps the same bytes (TestSmolLM3NoRopeLayers).
func TestSmolLM3SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"smollm3-tiny.json", "fp32", "sdpa", 400132, 680196},
		{"smollm3-tiny.json", "fp32", "eager", 448260, 776452},
		{"smollm3-tiny.json", "bf16", "sdpa", 258820, 416004},
		{"smollm3-tiny.json", "bf16", "eager", 315140, 528644},
		{"smollm3-tiny-w16.json", "fp32", "sdpa", 400132, 704772},
		{"smollm3-tiny-w16.json", "fp32", "eager", 448260, 776452},
		{"smollm3-tiny-w16.json", "bf16", "sdpa", 258820, 428292},
		{"smollm3-tiny-w16.json", "bf16", "eager", 315140, 528644},
	})
}

// SmolLM3's NoPE layers rotate nothing: in smollm3-3b.json's 36 layers
// (no_rope_layers 0 at every 4th) layers 3, 7, ..., 35 lower no rope op,
// the other 27 one for q and one for k. (What a layer keeps does not tell
// them apart: SDPA saves q and k, rotated or not, and the rotary tables
// are the model's, once.)
func TestSmolLM3NoRopeLayers(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "smollm3-3b.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	ropes := map[int]int{}
	for _, op := range prog.Ops {
		var layer int
		if _, err := fmt.Sscanf(op.Name, "model.layers.%d.", &layer); err == nil && op.Kind == "rope" {
			ropes[layer]++
		}
	}
	for layer := range 36 {
		want := 2
		if (layer+1)%4 == 0 {
			want = 0
		}
		if ropes[layer] != want {
			t.Errorf("layer %d: %d rope ops, want %d", layer, ropes[layer], want)
		}
	}
}
