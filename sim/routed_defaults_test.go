package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// classKeys are the keys the DeepSeek-V3-style routed reader takes
// (tools/oracle/routed_defaults.py's ROUTED), each with a default in its
// family's config class unless a case keeps it.
var classKeys = []string{"n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "intermediate_size",
	"first_k_dense_replace", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "topk_method",
	"scoring_func", "moe_layer_freq", "num_nextn_predict_layers", "hidden_act", "tie_word_embeddings",
	"num_experts", "num_shared_experts", "num_local_experts"}

// mlaKeys are the latent attention's sizes (tools/oracle/routed_defaults.py's
// MLA), each with a default in every MLA config class (q_lora_rank's
// SarvamMLAConfig's None: q projected whole).
var mlaKeys = []string{"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}

// routedDrop is classKeys but keep, each behind prefix.
func routedDrop(prefix string, keep ...string) []string {
	var out []string
	for _, k := range classKeys {
		if !slices.Contains(keep, k) {
			out = append(out, prefix+k)
		}
	}
	return out
}

// routedEdit deletes drop ("text_config.KEY" inside text_config), renames
// rename's keys and sets set's.
func routedEdit(drop []string, rename map[string]string, set map[string]any) func(map[string]any) {
	return func(c map[string]any) {
		for _, k := range drop {
			if sub, ok := strings.CutPrefix(k, "text_config."); ok {
				delete(textConfig(c), sub)
				continue
			}
			delete(c, k)
		}
		for from, to := range rename {
			c[to] = c[from]
			delete(c, from)
		}
		for k, v := range set {
			c[k] = v
		}
	}
}

// A config.json that leaves out the keys the routed reader takes builds
// its config class's defaults, as transformers does (configClasses: a
// missing n_routed_experts was read as 0, a dense model, and a missing
// n_shared_experts as none). The parameters transformers 5.25.0 builds
// from the same trimmed configs on the meta device (torch 2.15.0):
//
//	/work/venv-t/bin/python tools/oracle/routed_defaults.py
//
// "mla" leaves out the latent attention's sizes instead (q_lora_rank was
// read as 0, q projected whole, where DeepseekV3Config's default is 1536).
// "moe" keeps the file's first_k_dense_replace, so that MoE layers of the
// class's experts are built where the class's default makes every layer
// of the tiny model dense (DeepseekV3Config: 3); DeepseekV2Config's
// num_experts_per_tok and Dots1Config's expert counts default to None and
// stay (TestRoutedDefaultsNone). glm4v_moe drops Glm4vMoeTextConfig's
// attention_bias too (its default true), num_local_experts is
// attribute_map's name for n_routed_experts.
func TestRoutedDefaultsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		drop         []string
		rename       map[string]string
		want         int64
	}{
		{"deepseek_v2", "deepseek-v2-tiny.json", routedDrop("", "num_experts_per_tok"), nil, 35_695_200},
		{"deepseek_v2 moe", "deepseek-v2-tiny.json", routedDrop("", "num_experts_per_tok", "first_k_dense_replace"), nil, 19_975_136},
		{"deepseek_v3", "deepseek-v3-tiny.json", routedDrop(""), nil, 7_110_560},
		{"deepseek_v3 moe", "deepseek-v3-tiny.json", routedDrop("", "first_k_dense_replace"), nil, 104_644_512},
		{"deepseek_v32", "deepseek-v32-tiny.json", routedDrop(""), nil, 7_109_312},
		{"deepseek_v32 moe", "deepseek-v32-tiny.json", routedDrop("", "first_k_dense_replace"), nil, 104_643_264},
		{"glm_moe_dsa", "glm-5.json", routedDrop(""), nil, 743_911_199_232},
		{"glm4_moe", "glm4_moe-tiny.json", routedDrop(""), nil, 37_024_064},
		{"glm4_moe num_local_experts", "glm4_moe-tiny.json", nil, map[string]string{"n_routed_experts": "num_local_experts"}, 90_688},
		{"glm4_moe_lite", "glm-4.7-flash.json", routedDrop(""), nil, 29_943_390_976},
		{"dots1", "dots1-tiny.json", routedDrop("", "n_routed_experts", "n_shared_experts", "num_experts_per_tok"), nil, 8_181_792},
		{"dots1 moe", "dots1-tiny.json", routedDrop("", "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace"), nil, 7_579_168},
		{"mistral4", "mistral4-tiny.json", routedDrop(""), nil, 152_237_496},
		{"mistral4 moe", "mistral4-tiny.json", routedDrop("", "first_k_dense_replace"), nil, 103_863_736},
		{"solar_open", "solar_open-tiny.json", routedDrop(""), nil, 95_202_240},
		{"sarvam_moe", "sarvam_moe-tiny.json", routedDrop(""), nil, 52_368_288},
		{"param2moe", "param2moe-tiny.json", routedDrop(""), nil, 53_727_776},
		{"glm4v_moe", "glm4v-moe-tiny.json", append(routedDrop("text_config."), "text_config.attention_bias"), nil, 37_137_184},
		{"exaone_moe", "exaone_moe-tiny.json", routedDrop(""), nil, 28_763_168},
		{"sarvam_mla", "sarvam_mla-tiny.json", routedDrop(""), nil, 104_654_832},
		{"deepseek_v2 mla", "deepseek-v2-tiny.json", mlaKeys, nil, 3_841_344},
		{"deepseek_v3 mla", "deepseek-v3-tiny.json", mlaKeys, nil, 3_813_952},
		{"deepseek_v32 mla", "deepseek-v32-tiny.json", slices.DeleteFunc(slices.Clone(mlaKeys), func(k string) bool { return k == "qk_rope_head_dim" }), nil, 3_146_848}, // the indexer's 8 wide
		{"glm_moe_dsa mla", "glm-5.json", mlaKeys, nil, 743_911_199_232},
		{"glm4_moe_lite mla", "glm-4.7-flash.json", mlaKeys, nil, 29_943_390_976},
		{"mistral4 mla", "mistral4-tiny.json", mlaKeys, nil, 2_666_176},
		{"sarvam_mla mla", "sarvam_mla-tiny.json", mlaKeys, nil, 2_027_968},
		{"kimi_k25 mla", "kimi-k2.5-tiny.json", []string{"text_config.q_lora_rank", "text_config.kv_lora_rank", "text_config.qk_nope_head_dim",
			"text_config.qk_rope_head_dim", "text_config.v_head_dim"}, nil, 3_997_664},
		{"kimi_k25", "kimi-k2.5-tiny.json", routedDrop("text_config."), nil, 7_297_856},
		{"kimi_k25 moe", "kimi-k2.5-tiny.json", routedDrop("text_config.", "first_k_dense_replace"), nil, 104_831_808},
	} {
		m, err := hf.FromConfig(editConfig(t, tc.config, routedEdit(tc.drop, tc.rename, nil)), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
	}
}

// A key the config class defaults to None (DeepseekV2Config's
// num_experts_per_tok, Dots1Config's n_routed_experts, n_shared_experts
// and num_experts_per_tok) builds no MoE layer in transformers, so
// leaving it out is refused naming it; a key set under two of its names,
// a moe_layer_freq transformers does not build, and a first_k_dense_replace
// Glm4MoeLiteConfig does not have are refused too.
func TestRoutedDefaultsNone(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		drop         []string
		set          map[string]any
		want         string
	}{
		{"deepseek_v2 top-k", "deepseek-v2-tiny.json", []string{"num_experts_per_tok"}, nil, `config.json has no "num_experts_per_tok"`},
		{"dots1 experts", "dots1-tiny.json", []string{"n_routed_experts"}, nil, `config.json has no "n_routed_experts"`},
		{"dots1 shared", "dots1-tiny.json", []string{"n_shared_experts"}, nil, `config.json has no "n_shared_experts"`},
		{"dots1 top-k", "dots1-tiny.json", []string{"num_experts_per_tok"}, nil, `config.json has no "num_experts_per_tok"`},
		{"two names", "glm4_moe-tiny.json", nil, map[string]any{"num_local_experts": 4}, `"num_local_experts" and "n_routed_experts" are both set: Glm4MoeConfig reads`},
		{"v32 num_experts", "deepseek-v32-tiny.json", nil, map[string]any{"num_experts": 4}, `"num_experts" and "n_routed_experts" are both set`},
		{"moe_layer_freq", "deepseek-v3-tiny.json", nil, map[string]any{"moe_layer_freq": 2}, `"moe_layer_freq" must be 1 for model_type deepseek_v3 (got 2)`},
		{"lite first_k", "glm-4.7-flash.json", nil, map[string]any{"first_k_dense_replace": 2}, `"first_k_dense_replace" must be 1 for model_type glm4_moe_lite`},
	} {
		raw := editConfig(t, tc.config, routedEdit(tc.drop, nil, tc.set))
		_, err := hf.FromConfig(raw, "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		}
	}
}

// A partial_rotary_factor inside rope_parameters is the one transformers
// keeps for glm4_moe too (Glm4MoeConfig's __post_init__ only sets a
// default of 0.5), which memsh read past: glm4_moe-tiny.json with its
// top-level factor 0.5 replaced by "rope_parameters": {"rope_type":
// "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
// (written to /tmp/routed_s36_glm4_moe-rope.json), fp32, sdpa, 2 samples
// of 32 tokens, transformers 5.25.0, torch 2.15.0, CPU:
//
//	python tools/oracle/hf_block_saved.py /tmp/routed_s36_glm4_moe-rope.json {1,2} 2 32 float32 sdpa nocache keepfp32
//
// keeps 350,980 and 686,612 bytes (glm4_moe-tiny.json as it is, the half
// turned: 684,564 at 2 layers).
func TestGlm4MoeRopeParametersAsTransformers(t *testing.T) {
	edit := routedEdit([]string{"partial_rotary_factor"}, nil, map[string]any{
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}})
	for i, want := range [2]int64{350_980, 686_612} {
		c := editConfig(t, "glm4_moe-tiny.json", func(c map[string]any) { edit(c); c["num_hidden_layers"] = i + 1 })
		p := hfOraclePlan(t, c, hf.Options{Attn: "sdpa"}, "fp32")
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("rope_parameters' factor 1.0, %d layers: memsh keeps %d bytes, transformers %d (%+d)", i+1, got, want, got-want)
		}
	}
}

// rope_parameters' partial_rotary_factor and a top-level one that say
// the same number (1 and 1.0) are one factor; two that differ are
// refused, for GLM-4.5 as for Sarvam.
func TestRoutedRotaryFactorBothPlaces(t *testing.T) {
	same := routedEdit(nil, nil, map[string]any{"partial_rotary_factor": 1, "rope_parameters": map[string]any{"rope_type": "default", "partial_rotary_factor": 1.0}})
	if _, err := hf.FromConfig(editConfig(t, "glm4_moe-tiny.json", same), "sdpa"); err != nil {
		t.Errorf("1 and 1.0: %v", err)
	}
	differ := routedEdit(nil, nil, map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "partial_rotary_factor": 1.0}})
	_, err := hf.FromConfig(editConfig(t, "glm4_moe-tiny.json", differ), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"partial_rotary_factor" (0.5) and rope_parameters' (1) differ`) {
		t.Errorf("0.5 and 1.0: error %v, want one naming both", err)
	}
	_, err = hf.FromConfig(editConfig(t, "solar_open-tiny.json", routedEdit([]string{"partial_rotary_factor"}, nil,
		map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "partial_rotary_factor": 0.5}})), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"partial_rotary_factor" must be 1 for model_type solar_open (got 0.5)`) {
		t.Errorf("solar_open rope_parameters' 0.5: error %v, want the refusal", err)
	}
}
