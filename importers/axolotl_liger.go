package importers

import "strings"

// axolotlLigerPlugin is Axolotl's Liger plugin, the one plugin memsh reads.
const axolotlLigerPlugin = "axolotl.integrations.liger.LigerPlugin"

// axolotlLiger is the Liger plugin (src/axolotl/integrations/liger at
// axolotl 067b021c8): for a model type Liger patches itself
// (MODEL_TYPE_TO_APPLY_LIGER_FN), plugin.py l.109-146 calls its
// apply_liger_kernel_to_* with rope, rms_norm, swiglu (liger_glu_activation,
// or its deprecated liger_swiglu, args.py), cross_entropy and
// fused_linear_cross_entropy from the config. With rope, rms_norm,
// glu_activation and fused_linear_cross_entropy all on it is what
// transformers' use_liger_kernel applies (the hf importer's liger_kernels);
// another set, or another plugin, is refused. kind is the model's type.
func axolotlLiger(t *tree, kind string) error {
	plugins, err := t.strs("plugins")
	if err != nil {
		return err
	}
	liger := false
	for _, p := range plugins {
		if p != axolotlLigerPlugin {
			return t.errorf("plugins", "leave it out, or write the plan in Starlark (hf_config(\"config.json\"), train(...): docs/check.md)",
				"not modelled: plugins (cut_cross_entropy, kernels, ...) patch the model and its loss, here %s", quoteKey(p))
		}
		liger = true
	}
	flags := []string{"liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_fused_linear_cross_entropy"}
	set := map[string]bool{}
	for _, k := range append(flags, "liger_swiglu", "liger_cross_entropy", "liger_layer_norm", "liger_rms_norm_gated", "liger_use_token_scaling") {
		on, err := t.boolean(k, false)
		if err != nil {
			return err
		}
		if on && !liger {
			return t.errorf(k, "add "+axolotlLigerPlugin+" to plugins, or leave it out", "Liger's kernels run only with Axolotl's Liger plugin")
		}
		set[k] = on
	}
	if !liger {
		return nil
	}
	if t.has("liger_swiglu") && t.has("liger_glu_activation") {
		return t.errorf("liger_swiglu", "Axolotl refuses both: keep liger_glu_activation", "and liger_glu_activation are both set")
	}
	set["liger_glu_activation"] = set["liger_glu_activation"] || set["liger_swiglu"]
	switch kind {
	case "llama", "mistral", "qwen2", "qwen3":
	case "":
		return t.errorf("plugins", "pass the model's config.json with --model, or write the plan in Starlark (train(liger_kernels = True, loss_chunks = \"liger\"))",
			"Liger's kernels are read for Llama, Mistral, Qwen2 and Qwen3: memsh does not know this model's type")
	default:
		return t.errorf("plugins", "write the plan in Starlark (train(liger_kernels = True, loss_chunks = \"liger\"))",
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
			return t.errorf(k, "leave it out: memsh replays Liger's RoPE, RMSNorm, SwiGLU and fused linear cross-entropy", "not modelled")
		}
	}
	if len(off) > 0 {
		return t.errorf("plugins", "set "+strings.Join(off, ", ")+": true (memsh replays Liger's RoPE, RMSNorm, SwiGLU and fused linear cross-entropy together), or write the plan in Starlark",
			"Liger with %s off is not modelled", strings.Join(off, ", "))
	}
	t.derive("use_liger_kernel", true, "liger_rope")
	return nil
}
