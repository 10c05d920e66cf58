package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Kimi K2.5 (testdata/hf/kimi-k2.5.json: the hub file's structure as
// TensorRT-LLM's Kimi K2.5 test writes it, with Kimi K2's text sizes: 61
// layers of 7168, one dense, 384 experts of 2048, 64 heads, vocabulary
// 163,840; transformers reads the hub's vision keys (vt_hidden_size, ...)
// as unknown and builds MoonViT at its config class's defaults, 27 layers
// of 1152). Kimi_K25ForConditionalGeneration on the meta device
// (transformers 5.17.0): 1,026,879,353,328 in all, of which the vision
// tower 416,866,032 and the projector 54,277,888 (tools/oracle/kimivis.py
// CONFIG --params). Without the top-level tie_word_embeddings
// (Kimi_K25Config's default is True) the head is the embedding:
// 1,025,704,948,208. The model card's total (1T) could not be checked
// to the parameter: the hub is unreachable from here.
func TestKimiK25Params(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]any
		want int64
	}{
		{"kimi-k2.5", nil, 1_026_879_353_328},
		{"tied by default", map[string]any{"tie_word_embeddings": nil}, 1_025_704_948_208},
	} {
		cfg := shrinkConfig(t, "kimi-k2.5.json", tc.set)
		if tc.set != nil {
			cfg = []byte(strings.Replace(string(cfg), `"tie_word_embeddings":null,`, "", 1))
		}
		m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
		if v := layerOf[*nn.KimiVision](m); v == nil || v.TowerParams() != 416_866_032 || v.Params()-v.TowerParams() != 54_277_888 {
			t.Errorf("%s: the vision tower and projector are not 416,866,032 and 54,277,888 parameters: %+v", tc.name, v)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  []byte
		opts hf.Options
		want string
	}{
		{"5.12", readHF(t, "kimi-k2.5.json"), hf.Options{Attn: "flash", Transformers: "5.12.0"}, `model_type "kimi_k25" needs transformers 5.13 or later`},
		{"eager", readHF(t, "kimi-k2.5.json"), hf.Options{Attn: "eager", Transformers: "5.17.0"}, "eager attention is not modelled"},
		{"text model", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"text_config": map[string]any{"model_type": "qwen2"}}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `"text_config.model_type" must be Kimi K2's, "kimi_k2" or "deepseek_v3" (got "qwen2")`},
		{"no text_config", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"text_config": nil}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `no "text_config" object`},
		{"merge", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"vision_config": map[string]any{"merge_kernel_size": []int{2, 3}}}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `"vision_config.merge_kernel_size" is [2 3]; memsh models a square kernel`},
		{"position grid", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"vision_config": map[string]any{"pos_emb_width": 32}}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `"vision_config.pos_emb_width" (32) must be pos_emb_height (64)`},
		{"projector", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"projection_hidden_size": 1024}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `"projection_hidden_size" (1024) must be "vision_config.hidden_size" (1152)`},
		{"vision heads", shrinkConfig(t, "kimi-k2.5.json", map[string]any{"vision_config": map[string]any{"num_attention_heads": 7}}),
			hf.Options{Attn: "flash", Transformers: "5.17.0"}, `"vision_config.num_attention_heads" (7) must divide "vision_config.hidden_size" (1152)`},
	} {
		_, err := hf.FromConfigOptions(tc.cfg, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A small Kimi K2.5 lowers as transformers 5.17 names and runs it: the
// text model under model.language_model, its experts as DeepseekV3Experts
// (grouped_mm, fp32-weighted), the vision tower and the projector at
// Kimi_K25VisionConfig's defaults as model.vision_tower and
// model.mm_projector, with or without images (the same parameters); too
// many image tokens for seq are refused, naming the processor's grid.
func TestKimiK25TextModel(t *testing.T) {
	cfg := shrinkConfig(t, "kimi-k2.5.json", map[string]any{"text_config": map[string]any{"model_type": "kimi_k2",
		"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 2, "first_k_dense_replace": 1,
		"n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "num_attention_heads": 4, "q_lora_rank": 64,
		"kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024}})
	m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	if moe := firstMoE(m); moe == nil || moe.Impl != nn.MoEGroupedMM || !moe.WeightsFP32 {
		t.Errorf("Kimi K2.5's MoE under 5.17: %+v, want grouped_mm experts weighted in fp32", moe)
	}
	p := tinyPlan(t, m)
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, pa := range prog.Params {
		names[pa.Name] = true
	}
	want := []string{"model.language_model.embed_tokens.weight", "model.language_model.layers.1.mlp.experts.gate_up_proj",
		"model.language_model.norm.weight", "lm_head.weight", "model.vision_tower.patch_embed.pos_emb.position_embeddings",
		"model.vision_tower.layers.26.attn.proj.bias", "model.vision_tower.final_layernorm.weight", "model.mm_projector.out_proj.weight"}
	for _, n := range want {
		if !names[n] {
			t.Errorf("no parameter %s", n)
		}
	}
	idle := evalPlan(t, p)
	p.Images = core.Images{Count: 1, Height: 112, Width: 112} // 8 x 8 patches, 16 image tokens
	prog, err = p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, pa := range prog.Params {
		if !names[pa.Name] {
			t.Errorf("with images: parameter %s is not registered without them", pa.Name)
		}
		total++
	}
	if total != int64(len(names)) {
		t.Errorf("with images: %d parameter tensors, without %d", total, len(names))
	}
	if r := evalPlan(t, p); r.SavedActivations <= idle.SavedActivations {
		t.Errorf("images save %d bytes, no more than the text alone (%d)", r.SavedActivations, idle.SavedActivations)
	}
	p.Images = core.Images{Count: 1, Height: 448, Width: 448}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "256 image tokens a sample, more than seq=64") {
		t.Errorf("448 x 448 pixels (32 x 32 patches, 256 tokens) on 64 tokens: %v, want a refusal", err)
	}
}
