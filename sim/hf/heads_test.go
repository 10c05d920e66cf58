package hf

import (
	"strings"
	"testing"
)

// transformers has an XxxForConditionalGeneration class for the
// vision-language model types alone (Qwen3.5's among them, natively
// multimodal): for every other family the class is refused and named,
// never read as its causal LM. Gemma 3's belongs to gemma3, not to
// gemma3_text; Mistral 3's to mistral3, not to mistral's.
func TestConditionalGenerationHeads(t *testing.T) {
	has := map[string]bool{"gemma3": true, "gemma3n": true, "gemma4": true, "gemma4_unified": true, "internvl": true, "kimi_k25": true, "llama4": true, "llava": true, "llava_next": true, "llava_onevision": true, "mistral3": true, "mllama": true, "qwen2_vl": true, "qwen2_5_vl": true, "idefics3": true, "smolvlm": true, "lfm2_vl": true,
		"qwen3_vl": true, "qwen3_vl_moe": true, "qwen3_5": true, "qwen3_5_moe": true, "glm4v": true, "glm4v_moe": true}
	for i := range hfFamilies {
		f := &hfFamilies[i]
		arch := f.prefix + "ForConditionalGeneration"
		h, err := (&hfConfig{raw: map[string]any{}}).head(f, arch)
		switch {
		case has[f.modelType] && (err != nil || h != headCausalLM):
			t.Errorf("%s: %s read as head %d, %v; want its causal LM", f.modelType, arch, h, err)
		case !has[f.modelType] && (err == nil || !strings.Contains(err.Error(), `model_type "`+f.modelType+`" has no ForConditionalGeneration class (got model class "`+arch)):
			t.Errorf("%s: %s: error %v, want one saying the model type has no such class", f.modelType, arch, err)
		}
	}
	for _, tc := range []struct{ modelType, arch string }{
		{"gemma3_text", "Gemma3ForConditionalGeneration"},
		{"mistral", "Mistral3ForConditionalGeneration"},
		{"llama", "LlavaForConditionalGeneration"},
	} {
		for i := range hfFamilies {
			if f := &hfFamilies[i]; f.modelType == tc.modelType {
				if _, err := (&hfConfig{raw: map[string]any{}}).head(f, tc.arch); err == nil {
					t.Errorf("%s read %s", tc.modelType, tc.arch)
				}
			}
		}
	}
}
