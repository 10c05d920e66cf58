package sim

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// longcatPlanResult evaluates longcat-flash-tiny.json cut to layers
// LongCat layers (num_layers; hf_block_saved.py's LAYERS sets
// num_hidden_layers, which LongcatFlashConfig halves into num_layers).
func longcatSaved(t *testing.T, layers int, precision string, opts hf.Options) (saved, params, grads int64) {
	t.Helper()
	cfg := regexp.MustCompile(`"num_layers": \d+`).ReplaceAllString(string(readHF(t, "longcat-flash-tiny.json")), `"num_layers": `+strconv.Itoa(layers))
	r := evalPlan(t, hfOraclePlan(t, []byte(cfg), opts, precision))
	return r.SavedActivations + r.SavedWeightCopies, r.States.Params, r.States.Grads
}

// What LongCat-Flash's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained), longcat-flash-tiny.json (64 wide; MLA of 4 heads,
// q latent 32, kv latent 16, qk 8 + 4, v 12; dense MLPs of 96; 8
// experts of 32 and 4 zero experts, 3 a token) at 1 and 2 layers, 2
// samples of 32 tokens, the experts as grouped_mm and as the eager loop:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/longcat-flash-tiny.json {2,4} 2 32 {float32,bfloat16} sdpa nocache keepfp32 [eagerexperts]
//
// (LAYERS 2 and 4: num_hidden_layers is 2 x num_layers.) v_head_dim
// equals qk_nope_head_dim + qk_rope_head_dim so that the CPU's SDPA runs
// its flash kernel, as CUDA's fused kernels run MLA (with unequal head
// dims the CPU falls back to its math path, which keeps the s x s
// probabilities: 15,360 bytes more an attention at v 8, which memsh, pricing
// the GPU, does not model). In bf16 the router's classifier weight is bf16
// (_keep_in_fp32_modules applies to fp16 loads only) and its .float()
// copy is saved (a weight copy: SavedWeightCopies). The harness counts,
// besides, the parameter views the eager loop's gate_up_proj[e] and
// down_proj[e] make for experts e > 0 (data_ptr misses them): the whole
// 3-D parameters once a layer, left out of the comparison as for
// DeepSeek-V4 (TestDeepSeekV4SavesAsTransformers). param_bytes and
// grad_bytes at 2 layers: 896,000 (fp32), 448,000 (bf16).
func TestLongcatFlashSavesAsTransformers(t *testing.T) {
	expertViews := map[string]int64{"fp32": (8*64*64 + 8*64*32) * 4, "bf16": (8*64*64 + 8*64*32) * 2}
	states := map[string]int64{"fp32": 896_000, "bf16": 448_000}
	for _, tc := range []struct {
		precision, experts string
		saved              [2]int64
	}{
		{"fp32", "grouped_mm", [2]int64{896_676, 1_716_292}},
		{"fp32", "eager", [2]int64{1_140_868, 2_204_676}},
		{"bf16", "grouped_mm", [2]int64{540_836, 1_021_508}},
		{"bf16", "eager", [2]int64{662_148, 1_264_132}},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			want := saved
			if tc.experts == "eager" {
				want -= layers * expertViews[tc.precision]
			}
			got, params, grads := longcatSaved(t, i+1, tc.precision, hf.Options{Attn: "sdpa", Experts: tc.experts})
			if got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d less the parameter views, %d (%+d)", tc.precision, tc.experts, layers, got, saved, want, got-want)
			}
			if layers == 2 && (params != states[tc.precision] || grads != states[tc.precision]) {
				t.Errorf("%s %s: parameters %d B, gradients %d B, want %d", tc.precision, tc.experts, params, grads, states[tc.precision])
			}
		}
	}
}

// LongCat-Flash-Chat's parameters: 560,664,958,976 (the card's "560
// billion total"), which transformers 5.25.0 counts on the meta device for
// longcat-flash-chat.json (the published config.json's sizes, as
// mlx-community/LongCat-Flash-Chat-bf16 copies them: 28 layers of 6144,
// two MLAs of 64 heads (q latent 1536, kv latent 512, qk 128 + 64, v
// 128) and two MLPs of 12,288 a layer, 512 experts of 2048, 12 a token,
// and 256 zero experts; 131,072 untied embeddings). The checkpoint's MTP
// layer (model.mtp) is not built by transformers and not counted.
// longcat-flash-tiny.json: 224,000 (hf_block_saved.py's param_bytes at
// LAYERS 4 in fp32, 896,000).
func TestLongcatFlashParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"longcat-flash-chat.json": 560_664_958_976,
		"longcat-flash-tiny.json": 224_000,
	})
}

// Under full checkpointing (use_reentrant=False) each layer keeps its
// input, and the step holds what the forward made once and handed to the
// layers: position_ids and the rotary cos and sin (hf_block_saved.py ...
// {2,4} 2 32 {float32,bfloat16} sdpa nocache ckpt held keepfp32: saved
// 92,420 / 108,804 and held 1,280 in fp32; 67,844 / 76,036 and 768 in
// bf16). In fp16 from_pretrained keeps the router's classifier weight in
// fp32 (_keep_in_fp32_modules), so no weight.float() copy is saved and
// the weight's bytes double (param_bytes 238,400 at 1 layer against
// bf16's 236,864): saved 537,764 at 1 layer (... 2 2 32 float16 sdpa
// nocache keepfp32).
func TestLongcatFlashCheckpointAndFP16(t *testing.T) {
	cfg := func(layers int) []byte {
		return []byte(regexp.MustCompile(`"num_layers": \d+`).ReplaceAllString(string(readHF(t, "longcat-flash-tiny.json")), `"num_layers": `+strconv.Itoa(layers)))
	}
	for _, tc := range []struct {
		precision string
		saved     [2]int64
	}{
		{"fp32", [2]int64{92_420 + 1_280, 108_804 + 1_280}},
		{"bf16", [2]int64{67_844 + 768, 76_036 + 768}},
	} {
		for i, want := range tc.saved {
			p := hfOraclePlan(t, cfg(i+1), hf.Options{Attn: "sdpa"}, tc.precision)
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s checkpointed, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
	r := evalPlan(t, hfOraclePlan(t, cfg(1), hf.Options{Attn: "sdpa"}, "fp16"))
	if got := r.SavedActivations + r.SavedWeightCopies; got != 537_764 || r.States.Params != 238_400 {
		t.Errorf("fp16, 1 layer: memsh keeps %d bytes and %d of parameters, transformers 537,764 and 238,400", got, r.States.Params)
	}
}

// LongCat-Flash's parameters carry transformers' names, with their sizes:
// LongcatFlashForCausalLM(config).named_parameters() and named_buffers()
// for longcat-flash-tiny.json at 1 layer (transformers 5.25.0, torch
// 2.15.0, the meta device).
func TestLongcatFlashNames(t *testing.T) {
	want := map[string]int64{
		"model.embed_tokens.weight": 6400, "model.norm.weight": 64, "lm_head.weight": 6400,
		"model.layers.0.mlp.experts.gate_up_proj": 32768, "model.layers.0.mlp.experts.down_proj": 16384,
		"model.layers.0.mlp.router.classifier.weight": 768,
		"model.layers.0.input_layernorm.0.weight":     64, "model.layers.0.input_layernorm.1.weight": 64,
		"model.layers.0.post_attention_layernorm.0.weight": 64, "model.layers.0.post_attention_layernorm.1.weight": 64,
	}
	for _, i := range []string{"0", "1"} {
		for name, n := range map[string]int64{"q_a_proj": 2048, "q_a_layernorm": 32, "q_b_proj": 1536, "kv_a_proj_with_mqa": 1280,
			"kv_a_layernorm": 16, "kv_b_proj": 1280, "o_proj": 3072} {
			want["model.layers.0.self_attn."+i+"."+name+".weight"] = n
		}
		for _, name := range []string{"gate_proj", "up_proj", "down_proj"} {
			want["model.layers.0.mlps."+i+"."+name+".weight"] = 6144
		}
	}
	cfg := regexp.MustCompile(`"num_layers": \d+`).ReplaceAllString(string(readHF(t, "longcat-flash-tiny.json")), `"num_layers": 1`)
	for _, experts := range []string{"grouped_mm", "eager"} {
		prog, err := hfOraclePlan(t, []byte(cfg), hf.Options{Attn: "sdpa", Experts: experts}, "bf16").LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, p := range prog.Params {
			got[p.Name] = p.FullNumel
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s: %s has %d elements in memsh, %d in transformers", experts, name, got[name], n)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: memsh's parameter %s is not the model's", experts, name)
			}
		}
		buffers := map[string]bool{}
		for _, b := range prog.Buffers {
			buffers[b.Name] = true
		}
		if !buffers["model.layers.0.mlp.router.e_score_correction_bias"] {
			t.Errorf("%s: no buffer model.layers.0.mlp.router.e_score_correction_bias", experts)
		}
	}
}

// longcat_flash under a release before 5.25 is refused, naming 5.25 and
// why (families.go); moe_topk counts the zero experts too; q_lora_rank
// null (LongcatFlashMLA has no plain q_proj) is refused; zero_expert_num
// null is none (LongcatFlashMoE: config.zero_expert_num or 0: the router
// scores the 8 experts alone, 4 x 64 fewer weights); an
// unknown zero_expert_type is refused, naming the key; eager attention
// is refused as for every MLA family.
func TestLongcatFlashConfig(t *testing.T) {
	tiny := string(readHF(t, "longcat-flash-tiny.json"))
	for _, tc := range []struct {
		name, from, to string
		opts           hf.Options
		want           string
	}{
		{"4.57.1", "", "", hf.Options{Attn: "sdpa", Transformers: "4.57.1"}, `model_type "longcat_flash" needs transformers 5.25 or later`},
		{"5.24.0", "", "", hf.Options{Attn: "sdpa", Transformers: "5.24.0"}, `needs transformers 5.25 or later (got transformers="5.24.0")`},
		{"zero_expert_type", `"zero_expert_type": "identity"`, `"zero_expert_type": "const"`, hf.Options{Attn: "sdpa"}, `zero_expert_type`},
		{"eager", "", "", hf.Options{Attn: "eager"}, "eager attention is not modelled"},
		{"moe_topk", `"moe_topk": 3`, `"moe_topk": 13`, hf.Options{Attn: "sdpa"}, `"moe_topk" (13) must be at most "n_routed_experts" plus the zero experts (8 + 4)`},
		{"q_lora_rank", `"q_lora_rank": 32`, `"q_lora_rank": null`, hf.Options{Attn: "sdpa"}, `"q_lora_rank" must be a positive integer (got null)`},
	} {
		_, err := hf.FromConfigOptions([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"zero_expert_num": 4`, `"zero_expert_num": null`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(224_000-2*4*64); got != want {
		t.Errorf("zero_expert_num null: %d parameters, want %d", got, want)
	}
}
