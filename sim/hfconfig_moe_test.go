package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Layers that differ stack as transformers names them (layers.0,
// layers.1, ...), each a block for checkpointing and pipeline stages:
// Gemma 3 has five sliding-window layers to one global
// (sliding_window_pattern 6), gpt-oss alternates as layer_types says.
func TestHFLayerPatterns(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		local        []int64 // the sliding-window layers
		window       int64
	}{
		{"gemma3", `{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 7,
			"num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 100, "head_dim": 32, "sliding_window": 8}`,
			[]int64{0, 1, 2, 3, 4, 6}, 8},
		{"gpt_oss", `{"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "num_local_experts": 4,
			"num_experts_per_tok": 2, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}`,
			[]int64{0, 2}, 128},
	} {
		m, err := hf.FromConfig([]byte(tc.config), "flash")
		if err != nil {
			t.Fatal(err)
		}
		var stack *core.Repeat
		core.Walk(m.Layers[0], "", func(_ string, l core.Layer) {
			if r, ok := l.(*core.Repeat); ok {
				stack = r
			}
		})
		if stack == nil || stack.Blocks == nil {
			t.Fatalf("%s: no stack of differing blocks", tc.name)
		}
		var local []int64
		for i := int64(0); i < stack.Count(); i++ {
			core.Walk(stack.Block(i), "", func(_ string, l core.Layer) {
				if a, ok := l.(*nn.Attention); ok && a.Window > 0 {
					if a.Window != tc.window {
						t.Errorf("%s: layer %d window %d, want %d", tc.name, i, a.Window, tc.window)
					}
					local = append(local, i)
				}
			})
		}
		if len(local) != len(tc.local) {
			t.Fatalf("%s: sliding layers %v, want %v", tc.name, local, tc.local)
		}
		for i := range local {
			if local[i] != tc.local[i] {
				t.Errorf("%s: sliding layers %v, want %v", tc.name, local, tc.local)
			}
		}
		prog, err := tinyPlanFor(t, m).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		want := "model.layers." + core.Itoa(stack.Count()-1) + ".self_attn.q_proj.weight"
		found := false
		for _, p := range prog.Params {
			found = found || p.Name == want
		}
		if !found {
			t.Errorf("%s: no parameter named %s", tc.name, want)
		}
	}
}

func tinyPlanFor(t *testing.T, m *core.Model) *core.Plan {
	p := tinyPlan(t, m)
	p.Seq = 32
	p.Checkpoint, _ = core.ParseCheckpoint("full")
	return p
}

// gpt-oss: attention sinks are one parameter per head; the experts are
// 3-D parameters with biases (gate_up_proj [experts, 2*intermediate,
// hidden], down_proj), the router a weight and a bias.
func TestGptOssStructure(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "gpt-oss-20b.json"), "flash")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlanFor(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int64{}
	for _, p := range prog.Params {
		if strings.HasPrefix(p.Name, "model.layers.0.") {
			shapes[strings.TrimPrefix(p.Name, "model.layers.0.")] = p.Shape
		}
	}
	for name, want := range map[string][]int64{
		"self_attn.sinks":               {64},
		"mlp.router.weight":             {32, 2880},
		"mlp.router.bias":               {32},
		"mlp.experts.gate_up_proj":      {32, 5760, 2880},
		"mlp.experts.gate_up_proj_bias": {32, 5760},
		"mlp.experts.down_proj":         {32, 2880, 2880},
		"mlp.experts.down_proj_bias":    {32, 2880},
		"self_attn.q_proj.bias":         {4096},
	} {
		got := shapes[name]
		if len(got) != len(want) {
			t.Errorf("%s: shape %v, want %v", name, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: shape %v, want %v", name, got, want)
			}
		}
	}
}

// A stack of differing blocks splits into pipeline stages like a repeat,
// and describe() names each kind by its block indices.
func TestStackOfDifferingBlocks(t *testing.T) {
	m, err := hf.FromConfig([]byte(`{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96,
		"num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 100, "head_dim": 32}`), "flash")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	core.Walk(m.Layers[0], "model", func(path string, l core.Layer) {
		if _, ok := l.(*nn.Attention); ok {
			paths = append(paths, path)
		}
	})
	if want := "model.layers.0-4,6-10.self_attn model.layers.5,11.self_attn"; strings.Join(paths, " ") != want {
		t.Errorf("describe paths %q, want %q", strings.Join(paths, " "), want)
	}
	s, err := core.SplitStages(m, core.Parallelism{PP: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks) != 12 {
		t.Errorf("%d pipeline blocks, want 12", len(s.Blocks))
	}
	p := tinyPlanFor(t, m)
	p.Parallel = core.Parallelism{PP: 2}
	if _, err := Evaluate(p, core.Options{}); err != nil {
		t.Fatal(err)
	}
}
