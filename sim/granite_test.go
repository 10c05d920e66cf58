package sim

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What Granite 3.x (granite, granitemoe) keeps for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, default
// experts_implementation: grouped_mm), the tiny configs (64 wide, 4 heads
// of 16, 2 kv heads, vocab 256, tied; the MoE 4 experts of 32, top 2;
// every multiplier off 1), 2 samples of 32 tokens, 1 and 2 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/{granite,granitemoe}-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The multipliers save nothing (a scalar product or quotient); the MoE's
// router keeps its softmax over the k in fp32 (GraniteMoeTopKRouter's
// .float(): 256 bytes a layer more in bf16 than a router in bf16).
func TestGraniteSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"granite-tiny.json", "fp32", "sdpa", 400132, 680196},
		{"granite-tiny.json", "fp32", "eager", 448260, 776452},
		{"granite-tiny.json", "bf16", "sdpa", 258820, 416004},
		{"granite-tiny.json", "bf16", "eager", 315140, 528644},
		{"granitemoe-tiny.json", "fp32", "sdpa", 405268, 690468},
		{"granitemoe-tiny.json", "fp32", "eager", 453396, 786724},
		{"granitemoe-tiny.json", "bf16", "sdpa", 263700, 425764},
		{"granitemoe-tiny.json", "bf16", "eager", 320020, 538404},
	})
}

// savedOneTwo is what a tiny config's model keeps for backward cut to 1
// and to 2 layers (graniteSaved), as transformers keeps it.
type savedOneTwo struct {
	file, precision, attn string
	one, two              int64
}

// checkSavedOneTwo checks memsh's figures for each row.
func checkSavedOneTwo(t *testing.T, rows []savedOneTwo) {
	t.Helper()
	for _, tc := range rows {
		one, two := graniteSaved(t, tc.file, 1, tc.precision, tc.attn, false), graniteSaved(t, tc.file, 2, tc.precision, tc.attn, false)
		if one != tc.one || two != tc.two {
			t.Errorf("%s %s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.file, tc.precision, tc.attn, one, one-tc.one, two, two-tc.two)
		}
	}
}

// With every layer checkpointed (use_reentrant=False), the same with
// ckpt, 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/{granite,olmoe}-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache ckpt
//
// fp32 132,356, 148,740, 165,124; bf16 107,780, 115,972, 124,164, for
// granite and olmoe alike (64 wide, vocab 256: what they keep is the
// layers' inputs and the loss's): each layer more keeps its input (16,384
// and 8,192 bytes). The step holds the rotary cos and sin besides, which
// the model's forward makes before its layers and hands each checkpointed
// layer as a keyword argument: the partial the checkpoint recomputes
// holds them, out of the harness's pack hook's sight, until the backward
// (a weakref to each (1, 32, 16) table, from a forward pre-hook on the
// decoder layers, lives after the checkpointed forward at 1 and 2 layers
// and is dead after the backward; transformers 5.25.0, torch 2.15.0):
// 4,096 bytes in fp32, 2,048 in bf16, once whatever the depth
// (core.OutsideRegions); and so the position_ids every layer is handed,
// (1, 32) int64, 256 bytes (core.Model.PositionIDs; hf_block_saved.py's
// held, TestCheckpointHoldsForwardOnceValues).
func TestGraniteCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision string
		saved           [3]int64 // hf_block_saved.py at 1, 2 and 3 layers
		tables          int64    // the rotary pair and position_ids
	}{
		{"granite-tiny.json", "fp32", [3]int64{132356, 148740, 165124}, 4096 + 256},
		{"granite-tiny.json", "bf16", [3]int64{107780, 115972, 124164}, 2048 + 256},
		{"olmoe-tiny.json", "fp32", [3]int64{132356, 148740, 165124}, 4096 + 256},
		{"olmoe-tiny.json", "bf16", [3]int64{107780, 115972, 124164}, 2048 + 256},
	} {
		for i, want := range tc.saved {
			if got := graniteSaved(t, tc.file, i+1, tc.precision, "sdpa", true); got != want+tc.tables {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", tc.file, tc.precision, i+1, got, want+tc.tables, got-want-tc.tables)
			}
		}
	}
}

// graniteSaved is what a model built from the tiny config file, cut to
// its first layers layers (num_hidden_layers, and layer_types when it
// has them, as the harnesses cut them), keeps for backward, 2 samples of
// 32 tokens on the CPU.
func graniteSaved(t *testing.T, file string, layers int, precision, attn string, ckpt bool) int64 {
	t.Helper()
	return hfSaved(t, file, layers, precision, hf.Options{Attn: attn}, ckpt)
}

// hfSaved is graniteSaved with hf_config's options (linear_attn=); layers
// 0 keeps the config's.
func hfSaved(t *testing.T, file string, layers int, precision string, opts hf.Options, ckpt bool) int64 {
	t.Helper()
	return evalPlan(t, hfSavedPlan(t, file, layers, precision, opts, ckpt)).SavedActivations
}

// hfSavedPlan is the plan hfSaved evaluates.
func hfSavedPlan(t *testing.T, file string, layers int, precision string, opts hf.Options, ckpt bool) *core.Plan {
	t.Helper()
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(readHF(t, file))
	if layers > 0 { // else the layers as written
		cfg = regexp.MustCompile(`"num_hidden_layers": \d+`).ReplaceAllString(cfg, `"num_hidden_layers": `+strconv.Itoa(layers))
		for _, key := range []string{"layer_types", "mlp_layer_types", "num_attention_heads_per_layer", "layer_rope_theta"} { // per-layer lists cut with the layers, as hf_block_saved.py cuts them
			cfg = regexp.MustCompile(`"`+key+`": \[([^\]]*)\]`).ReplaceAllStringFunc(cfg, func(list string) string {
				types := strings.Split(strings.TrimSuffix(strings.TrimPrefix(list, `"`+key+`": [`), "]"), ", ")
				return `"` + key + `": [` + strings.Join(types[:layers], ", ") + "]"
			})
		}
	}
	m, err := hf.FromConfigOptions([]byte(cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = cpu, 2, 32
	if p.Precision, err = core.LookupPrecision(precision); err != nil {
		t.Fatal(err)
	}
	if ckpt {
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1} // transformers 5: use_reentrant=False
	}
	return p
}

// The logits' division by logits_scaling is one op after lm_head; the
// multipliers' products one op each (the embedding's, two a layer).
func TestGraniteMultiplierOps(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "granite-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, op := range prog.Ops {
		if op.Kind == "div" || op.Kind == "mul" {
			count[op.Kind+" "+op.Name]++
		}
	}
	if count["div logits_scaling"] != 1 || count["mul model.embedding_multiplier"] != 1 || count["mul model.layers.0.residual_multiplier"] != 2 {
		t.Errorf("ops %v: want one logits_scaling division, one embedding_multiplier and two residual_multiplier products a layer", count)
	}
}
