package importers

import (
	"slices"
	"strings"
)

// axolotlLigerPlugin and axolotlCCEPlugin are the Axolotl plugins memsh
// reads: Liger's kernels and Cut Cross-Entropy. axolotlSwanLabPlugin logs
// to SwanLab (integrations/swanlab/plugins.py at 067b021c8: run setup,
// callbacks that log metrics and, under RL, the batch's completions as
// text): nothing on the GPU.
const (
	axolotlLigerPlugin   = "axolotl.integrations.liger.LigerPlugin"
	axolotlCCEPlugin     = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"
	axolotlSwanLabPlugin = "axolotl.integrations.swanlab.SwanLabPlugin"
)

// cceModelTypes are the model types the Cut Cross-Entropy patch Axolotl
// pins knows (cut_cross_entropy/transformers/patch.py PATCH_FNS, Axolotl's
// fork of ml-cross-entropy at 5f0c7a7).
var cceModelTypes = strings.Fields(`afmoe apertus arcee cohere cohere2 cohere2_moe deepseek_v2 deepseek_v3 deepseek_v4
	exaone4 exaone4_5 exaone_moe gemma gemma2 gemma3 gemma3_text gemma3n gemma3n_text gemma4 gemma4_text gemma4_unified
	gemma4_unified_text glm glm4 glm4_moe glm4_moe_lite glm_moe_dsa glm46v glm4v glm_image glm4v_moe gpt_oss granite granitemoe
	granitemoeshared granitemoehybrid hunyuan_v1_dense hunyuan_v1_moe internvl kimi_linear lfm2 lfm2_moe lfm2_vl llama llama4
	llava llama4_text minimax minimax_m2 ministral ministral3 mistral mistral3 mistral4 mixtral mllama nemotron_h olmo olmo2
	olmo3 olmoe phi phi3 phi4_multimodal qwen2 qwen2_moe qwen2_vl qwen2_5_vl qwen3 qwen3_5 qwen3_5_text qwen3_5_moe
	qwen3_5_moe_text qwen3_moe qwen3_vl qwen3_vl_moe qwen3_next smollm3 seed_oss step3p5 step3p7 voxtral`)

// axolotlLiger reads Axolotl's plugins, Liger's and Cut Cross-Entropy's,
// and reports whether the loss is Cut Cross-Entropy (hfRun.cce).
//
// Liger (src/axolotl/integrations/liger at axolotl 067b021c8): for a
// model type Liger patches itself (MODEL_TYPE_TO_APPLY_LIGER_FN),
// plugin.py l.109-146 calls its apply_liger_kernel_to_* with rope,
// rms_norm, swiglu (liger_glu_activation, or its deprecated liger_swiglu,
// args.py), cross_entropy and fused_linear_cross_entropy from the config.
// With rope, rms_norm, glu_activation and fused_linear_cross_entropy all
// on it is what transformers' use_liger_kernel applies (the hf importer's
// liger_kernels); with Cut Cross-Entropy, the same kernels but its fused
// loss off. Another set, or another plugin, is refused.
//
// Cut Cross-Entropy (integrations/cut_cross_entropy): cut_cross_entropy
// defaults to true once the plugin is listed (args.py), which then
// patches the model type's forward (cce_patch) to call
// linear_cross_entropy on the final norm's output and lm_head's weight
// (train(loss_chunks = "cce"), sim/core/cce.go). kind is the model's type.
func axolotlLiger(t *tree, kind string) (cce bool, err error) {
	plugins, err := t.strs("plugins")
	if err != nil {
		return false, err
	}
	liger, ccePlugin := false, false
	for _, p := range plugins {
		switch p {
		case axolotlLigerPlugin:
			liger = true
		case axolotlCCEPlugin:
			ccePlugin = true
		case axolotlSwanLabPlugin:
		default:
			return false, t.errorf("plugins", "leave it out, or write the plan in Starlark (hf_config(\"config.json\"), train(...): docs/check.md)",
				"not modelled: plugins (kernels, ...) patch the model and its loss, here %s (memsh reads Liger's and Cut Cross-Entropy's; SwanLab's logs only)", quoteKey(p))
		}
	}
	if cce, err = t.boolean("cut_cross_entropy", ccePlugin); err != nil {
		return false, err
	}
	if cce && !ccePlugin {
		return false, t.errorf("cut_cross_entropy", "add "+axolotlCCEPlugin+" to plugins, or leave it out", "Cut Cross-Entropy runs only with Axolotl's CutCrossEntropyPlugin")
	}
	if cce {
		switch {
		case kind == "":
			return false, t.errorf("plugins", "pass the model's config.json with --model, or write the plan in Starlark (train(loss_chunks = \"cce\"))",
				"Cut Cross-Entropy patches the forward of the model types its patch knows: memsh does not know this model's type")
		case !slices.Contains(cceModelTypes, kind):
			return false, t.errorf("plugins", "leave "+axolotlCCEPlugin+" out: its patch (cut_cross_entropy/transformers/patch.py) has no forward for this model type",
				"Cut Cross-Entropy does not patch %s", quoteKey(kind))
		}
	}
	all := []string{"liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_fused_linear_cross_entropy"}
	flags := all // the kernels memsh replays together
	if cce {
		flags = all[:3] // Cut Cross-Entropy is the loss
	}
	set := map[string]bool{}
	for _, k := range append(all, "liger_swiglu", "liger_cross_entropy", "liger_layer_norm", "liger_rms_norm_gated", "liger_use_token_scaling") {
		on, err := t.boolean(k, false)
		if err != nil {
			return false, err
		}
		if on && !liger {
			return false, t.errorf(k, "add "+axolotlLigerPlugin+" to plugins, or leave it out", "Liger's kernels run only with Axolotl's Liger plugin")
		}
		set[k] = on
	}
	if !liger {
		return cce, nil
	}
	if cce && set["liger_fused_linear_cross_entropy"] {
		return false, t.errorf("liger_fused_linear_cross_entropy", "keep one: liger_fused_linear_cross_entropy: false, or cut_cross_entropy: false",
			"Liger's fused linear cross-entropy and Cut Cross-Entropy both replace the loss")
	}
	if t.has("liger_swiglu") && t.has("liger_glu_activation") {
		return false, t.errorf("liger_swiglu", "Axolotl refuses both: keep liger_glu_activation", "and liger_glu_activation are both set")
	}
	set["liger_glu_activation"] = set["liger_glu_activation"] || set["liger_swiglu"]
	switch kind {
	case "llama", "mistral", "qwen2", "qwen3":
	case "":
		return false, t.errorf("plugins", "pass the model's config.json with --model, or write the plan in Starlark (train(liger_kernels = True, loss_chunks = \"liger\"))",
			"Liger's kernels are read for Llama, Mistral, Qwen2 and Qwen3: memsh does not know this model's type")
	default:
		return false, t.errorf("plugins", "write the plan in Starlark (train(liger_kernels = True, loss_chunks = \"liger\"))",
			"Liger's kernels on %s are not modelled here (memsh reads them for Llama, Mistral, Qwen2 and Qwen3)", quoteKey(kind))
	}
	var off []string
	for _, k := range flags {
		if !set[k] {
			off = append(off, k)
		}
	}
	for _, k := range []string{"liger_cross_entropy", "liger_layer_norm", "liger_rms_norm_gated", "liger_use_token_scaling"} {
		if set[k] {
			return false, t.errorf(k, "leave it out: memsh replays Liger's RoPE, RMSNorm, SwiGLU and fused linear cross-entropy", "not modelled")
		}
	}
	if len(off) > 0 {
		return false, t.errorf("plugins", "set "+strings.Join(off, ", ")+": true (memsh replays Liger's RoPE, RMSNorm, SwiGLU and fused linear cross-entropy together, or the first three beside Cut Cross-Entropy), or write the plan in Starlark",
			"Liger with %s off is not modelled", strings.Join(off, ", "))
	}
	t.derive("use_liger_kernel", true, "liger_rope")
	return cce, nil
}
