package lang

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestStdlibLlama4MatchesHFConfig: the zoo's llama4("scout") and
// llama4("maverick") against hf_config on their config.json
// (sim/testdata/hf, read with arch="Llama4ForCausalLM" at transformers'
// default release): the same parameters, tensor for tensor (name, shape),
// the same layers (kind and summary: describe()'s rows, the blocks of as
// many kinds), and for a bf16-mixed AdamW step the same saved bytes in every module
// (hf_config's names carry the model. prefix of Llama4ForCausalLM.model),
// the same saved activations and the same peak. At 256 tokens the chunked
// layers run unmasked; at 8,192 (one chunk) SDPA gets the chunked mask
// (nn.Attention.chunkMasked). The counts are transformers 5.17.0's on the
// meta device (sim/llama4_test.go).
func TestStdlibLlama4MatchesHFConfig(t *testing.T) {
	g := runWithHFConfigs(t, `load("@stdlib//llm.star", "llama4")
scout = llama4("scout")
maverick = llama4("maverick")
scout_eager = llama4("scout", attn = "eager")
hf_scout = hf_config("hf/llama-4-scout-17b-16e.json", arch = "Llama4ForCausalLM")
hf_maverick = hf_config("hf/llama-4-maverick-17b-128e.json", arch = "Llama4ForCausalLM")
hf_scout_eager = hf_config("hf/llama-4-scout-17b-16e.json", arch = "Llama4ForCausalLM", attn = "eager")
`, "llama-4-scout-17b-16e.json", "llama-4-maverick-17b-128e.json")
	for _, tc := range []struct {
		zoo, hf string
		params  int64
		seqs    []int64
	}{
		{"scout", "hf_scout", 107_769_861_120, []int64{256, 8192}},
		{"maverick", "hf_maverick", 400_711_848_960, []int64{256, 8192}},
		{"scout_eager", "hf_scout_eager", 107_769_861_120, []int64{256}},
	} {
		zoo, hfm := g[tc.zoo].(*models.Model).Sim(), g[tc.hf].(*models.Model).Sim()
		if zoo.Params() != tc.params || hfm.Params() != tc.params {
			t.Errorf("%s: params %d, hf_config %d, want %d", tc.zoo, zoo.Params(), hfm.Params(), tc.params)
		}
		if a, b := layerSummaries(zoo.Layers), layerSummaries(hfm.Layers); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: layers (kind: summary -> count)\n%v\nhf_config's\n%v", tc.zoo, a, b)
		}
		for _, seq := range tc.seqs {
			a, b := llama4Step(t, zoo, seq), llama4Step(t, hfm, seq)
			if len(a.params) != len(b.params) {
				t.Errorf("%s: %d parameter tensors, hf_config %d", tc.zoo, len(a.params), len(b.params))
			}
			for name, shape := range b.params {
				if a.params[name] != shape {
					t.Errorf("%s: %s is %s, hf_config's %s", tc.zoo, name, a.params[name], shape)
				}
			}
			for m, n := range b.saved {
				if a.saved[m] != n {
					t.Errorf("%s seq %d: module %s saves %d bytes, hf_config's %d", tc.zoo, seq, m, a.saved[m], n)
				}
			}
			for m, n := range a.saved {
				if _, ok := b.saved[m]; !ok {
					t.Errorf("%s seq %d: module %s saves %d bytes, hf_config's has no such module", tc.zoo, seq, m, n)
				}
			}
			if a.r.SavedActivations != b.r.SavedActivations || a.r.PeakAllocated != b.r.PeakAllocated {
				t.Errorf("%s seq %d: saved %d peak %d, hf_config saved %d peak %d", tc.zoo, seq,
					a.r.SavedActivations, a.r.PeakAllocated, b.r.SavedActivations, b.r.PeakAllocated)
			}
			if len(a.saved) < 10 || a.r.SavedActivations == 0 {
				t.Errorf("%s seq %d: %d modules save %d bytes: nothing compared", tc.zoo, seq, len(a.saved), a.r.SavedActivations)
			}
		}
	}
}

// llama4Run is what TestStdlibLlama4MatchesHFConfig compares of one step.
type llama4Run struct {
	params map[string]string // parameter name (model. prefix dropped) -> shape
	saved  map[string]int64  // module -> bytes its ops keep for backward at the forward's end
	r      *replay.Report
}

func llama4Step(t *testing.T, m *core.Model, seq int64) llama4Run {
	t.Helper()
	mixed, _ := core.LookupPrecision("bf16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	p := &core.Plan{Model: m, Batch: 1, Seq: seq, GradAccum: 1, Members: 1, Precision: mixed,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Runtime: rt, Device: hw.Device{Name: "test", Memory: 1 << 50}}
	r, err := sim.Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	out := llama4Run{params: map[string]string{}, saved: map[string]int64{}, r: r}
	for _, pi := range prog.Params {
		out.params[strings.TrimPrefix(pi.Name, "model.")] = fmt.Sprint(pi.Shape)
	}
	for v, kept := range replay.SavedAtForwardEnd(prog, p) {
		if !kept {
			continue
		}
		module := "input"
		if op := prog.Values[v].Producer; op >= 0 {
			module = strings.TrimPrefix(prog.Ops[op].Module, "model.")
		}
		out.saved[module] += prog.Values[v].Bytes
	}
	return out
}

// layerSummaries counts the layers under ls by kind and summary (what
// describe() prints: "attention: dim 5120, ..., chunks of 8192, sdpa",
// "repeat: 48 blocks of 2 kinds"), leaving out the sequentials and
// residuals that only group them (hf_config's model. sequential).
func layerSummaries(ls []core.Layer) map[string]int {
	out := map[string]int{}
	var walk func([]core.Layer)
	walk = func(ls []core.Layer) {
		for _, l := range ls {
			if k := l.Kind(); k != "sequential" && k != "residual" {
				out[k+": "+l.Summary()]++
			}
			walk(l.Children())
		}
	}
	walk(ls)
	return out
}
