package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// Layers that differ stack as transformers names them (layers.0,
// layers.1, ...), each a block for checkpointing and pipeline stages:
// Gemma 3 has five sliding-window layers to one global
// (sliding_window_pattern 6), gpt-oss alternates as layer_types says,
// dots.llm1 slides from max_window_layers on.
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
		// Dots1Config: the layers from max_window_layers on slide when
		// sliding_window is set, unless layer_types says otherwise.
		{"dots1", `{"model_type": "dots1", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
			"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "n_routed_experts": 4, "n_shared_experts": 1, "moe_intermediate_size": 16,
			"num_experts_per_tok": 2, "first_k_dense_replace": 1, "sliding_window": 8, "max_window_layers": 1}`,
			[]int64{1, 2}, 8},
		{"dots1 layer_types", `{"model_type": "dots1", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
			"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "n_routed_experts": 4, "n_shared_experts": 1, "moe_intermediate_size": 16,
			"num_experts_per_tok": 2, "first_k_dense_replace": 1, "sliding_window": 8, "max_window_layers": 1,
			"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}`,
			[]int64{0, 2}, 8},
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

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json; the R1 config copied
// in public code is the same architecture). The model card counts 671 B
// for the main model and 685 B with the MTP module the checkpoint holds.
// By hand (h 7168, 61 layers, 128 heads, V 129,280):
//
//	MLA per layer: q_a_proj 7168*1536 = 11,010,048; q_a_layernorm 1,536;
//	  q_b_proj 1536*128*192 = 37,748,736; kv_a_proj_with_mqa 7168*576 =
//	  4,128,768; kv_a_layernorm 512; kv_b_proj 512*128*256 = 16,777,216;
//	  o_proj 16384*7168 = 117,440,512; sum 187,107,328; norms 14,336.
//	dense layers (3): mlp 3*7168*18432 = 396,361,728: 583,483,392 each.
//	MoE layers (58): router 256*7168 = 1,835,008; 256 experts of
//	  3*7168*2048 = 11,274,289,152; shared 44,040,192: 11,507,286,016 each
//	  (e_score_correction_bias is a buffer in transformers).
//	embeddings and the untied head 2*926,679,040; final norm 7,168.
//	DeepseekV3ForCausalLM: 671,026,404,352 (the card's 671 B).
//	MTP module: enorm, hnorm, shared_head.norm 3*7168; eh_proj 2*7168²
//	  = 102,760,448; an MoE layer: 11,610,067,968, embedding and head
//	  shared: 682,636,472,320. The checkpoint adds its copies of the
//	  embedding and head (1,853,358,080) and 59 correction biases
//	  (15,104): 684,489,845,504, the card's 685 B.
func TestDeepSeekV3Params(t *testing.T) {
	for _, tc := range []struct {
		mtp  bool
		want int64
	}{{false, 671_026_404_352}, {true, 682_636_472_320}} {
		m, err := hf.FromConfigOptions(readHF(t, "deepseek-v3.json"), hf.Options{Attn: "flash", MTP: tc.mtp})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("mtp=%t: %d parameters, want %d", tc.mtp, got, tc.want)
		}
	}
}

// With mtp, DeepSeek's MTP module runs after the trunk: its embedding
// and head share the main model's weights (no second copy in memory), its
// block and cross-entropy add activations and a second loss.
func TestDeepSeekMTPLowers(t *testing.T) {
	cfg := []byte(`{"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
		"num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 100, "q_lora_rank": 32, "kv_lora_rank": 16,
		"qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 8, "n_shared_experts": 1,
		"num_experts_per_tok": 2, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1}`)
	var reps [2]struct {
		params, stored, saved int64
	}
	for i, mtp := range []bool{false, true} {
		m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", MTP: mtp})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		r := evalPlan(t, p)
		reps[i].params, reps[i].stored, reps[i].saved = r.Params, r.States.Params, r.SavedActivations
	}
	// bf16 weights, the MTP block's router (8 x 64) fp32 as from_pretrained
	// keeps it (nn.MoE.KeepRouterFP32): 2 B more each.
	const router = 8 * 64 * 2
	extra := reps[1].params - reps[0].params
	if extra <= 0 || reps[1].stored-reps[0].stored != 2*extra+router {
		t.Errorf("mtp adds %d parameters and %d bytes of weights: the embedding and head must be shared", extra, reps[1].stored-reps[0].stored)
	}
	if reps[1].saved <= reps[0].saved {
		t.Errorf("mtp saves %d bytes, no more than without (%d)", reps[1].saved, reps[0].saved)
	}
}

// On a pipeline the MTP module sits on the last stage (Megatron's
// mtp_process): that stage holds its own copy of the embedding (the
// first stage holds the model's), but the MTP head is the output layer
// (MultiTokenPredictionBlock computes its logits with the model's
// output_layer), not a second one. memsh had registered the head twice
// on a pipelined last stage: 0.93 B parameters (5.8 GiB of Megatron's
// states) too many on DeepSeek-V3 (calib_mlm_dsv3_test.go).
func TestDeepSeekMTPPipelineSharesHead(t *testing.T) {
	const hidden, vocab = 64, 100
	cfg := []byte(`{"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
		"num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 100, "q_lora_rank": 32, "kv_lora_rank": 16,
		"qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 8, "n_shared_experts": 1,
		"num_experts_per_tok": 2, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1}`)
	for _, tc := range []struct {
		name string
		par  core.Parallelism
	}{
		{"pp 3", core.Parallelism{PP: 3}},
		{"pp 2, 2 virtual stages, the MTP module alone on the last chunk", core.Parallelism{PP: 2, VirtualStages: 2, StageLayers: []int64{1, 1, 1, 0}}},
	} {
		var stored, params [2]int64
		for i, mtp := range []bool{false, true} {
			m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", MTP: mtp})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Parallel = tc.par
			p.Parallel.MicroBatches = 6
			p.GradAccum = 6
			r := evalPlan(t, p)
			last := r.Ranks[len(r.Ranks)-1]
			stored[i], params[i] = last.States.Params, r.Params
		}
		// bf16 weights: the module's own parameters and the embedding copy;
		// its MoE router (8 x 64) fp32 (nn.MoE.KeepRouterFP32), 2 B more each.
		want := 2*(params[1]-params[0]+vocab*hidden) + 8*hidden*2
		if got := stored[1] - stored[0]; got != want {
			t.Errorf("%s: mtp adds %d bytes of weights to the last stage, want %d (its own %d parameters and the embedding's copy, the head shared)",
				tc.name, got, want, params[1]-params[0])
		}
	}
}

// TestGLMFamilies: GLM-4.7-Flash (glm4_moe_lite: DeepSeek-V3's MLA with
// GLM-4.5's experts and router, transformers' Glm4MoeLiteForCausalLM)
// from its config.json as transcribed in public vLLM and mlx test code
// (zai-org/GLM-4.7-Flash: 47 layers of 2048, 20 heads, q latent 768, kv
// latent 512, qk 192 + 64, v 256, one dense layer of 10240, then 64
// experts of 1536 and one shared, 4 per token), counted by transformers
// 5.17.0 and 5.25.0 on the meta device: 29,943,390,976 (Ollama's
// 29.9 B), the same under experts= "grouped_mm" and "eager". A family newer than the
// transformers= release is refused: glm4_moe_lite before 5.0
// (Megatron-Bridge's GLM-4.7 page: "transformers >= 5.0.0rc0 is
// required"), glm4_moe before 4.54.
func TestGLMFamilies(t *testing.T) {
	flash := readHF(t, "glm-4.7-flash.json")
	// 5.25.0 counts the same on the meta device; "" is the default, 5.25.0.
	for _, version := range []string{"5.17.0", "5.25.0", ""} {
		for _, experts := range []string{"", "grouped_mm", "eager"} {
			m, err := hf.FromConfigOptions(flash, hf.Options{Attn: "flash", Transformers: version, Experts: experts})
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Params(); got != 29_943_390_976 {
				t.Errorf("transformers %q, experts=%q: %d parameters, want 29,943,390,976", version, experts, got)
			}
		}
	}
	for _, tc := range []struct{ file, version, want string }{
		{"glm-4.7-flash.json", "4.57.1", `model_type "glm4_moe_lite" needs transformers 5.0 or later (got transformers="4.57.1")`},
		{"glm-4.5-air.json", "4.53.3", `model_type "glm4_moe" needs transformers 4.54 or later`},
	} {
		_, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "flash", Transformers: tc.version})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s under transformers %q: error %v, want %q", tc.file, tc.version, err, tc.want)
		}
	}
	// the hint names the release that wrote the config, where it says one
	saved := shrinkConfig(t, "glm-4.7-flash.json", map[string]any{"transformers_version": "5.0.0.dev0"})
	_, err := hf.FromConfigOptions(saved, hf.Options{Attn: "flash", Transformers: "4.57.1"})
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Hint, "this config.json was written by transformers 5.0.0.dev0") {
		t.Errorf("GLM-4.7-Flash saved by 5.0.0.dev0 under transformers 4.57.1: %v (hint %q)", err, hintOf(ue))
	}
	if _, err := hf.FromConfigOptions(readHF(t, "glm-4.5-air.json"), hf.Options{Attn: "flash", Transformers: "4.54.0"}); err != nil {
		t.Errorf("glm4_moe under 4.54.0: %v", err)
	}
	small := shrinkConfig(t, "glm-4.7-flash.json", map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
		"num_hidden_layers": 3, "n_routed_experts": 8, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64,
		"kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024})
	m, err := hf.FromConfigOptions(small, hf.Options{Attn: "flash", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	if moe := firstMoE(m); moe == nil || moe.Impl != nn.MoEGroupedMM || !moe.WeightsFP32 {
		t.Errorf("GLM-4.7-Flash's MoE under 5.17: %+v, want grouped_mm experts weighted in fp32 (Glm4MoeLiteExperts is DeepseekV3Experts)", moe)
	}
	evalPlan(t, tinyPlan(t, m))
}

func hintOf(e *units.Error) string {
	if e == nil {
		return ""
	}
	return e.Hint
}
