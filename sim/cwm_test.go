package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// CWM's parameters, which transformers 5.25.0 counts on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; the first line of `/work/venv-t/bin/python
// tools/oracle/hf_defaults.py --only FILE`): cwm-tiny.json 143,808;
// cwm-defaults.json 32,581,097,472. The latter is CwmConfig() written out
// (its defaults: 64 layers of 6144, 48 heads of 128 over 8 kv heads, an
// MLP of 21504, 128,256 untied embeddings, layer_types full where i % 4
// == 0, an 8192-token window), the count transformers builds from it:
// facebook/cwm's card says "a dense 32-billion-parameter LLM" and its
// config.json (a gated repository) is not reachable from here, so no
// published exact count is held.
func TestCWMParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"cwm-tiny.json":     143_808,
		"cwm-defaults.json": 32_581_097_472,
	})
}

// What CWM's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): cwm-tiny.json (64 wide, 4 heads
// of 16, 2 kv heads, an MLP of 128, sliding_window 16, layer_types
// sliding, full, sliding), 2 samples of 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cwm-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer; the sliding layers' window bites at 32 tokens (SDPA gets
// its mask and saves the additive bias: without the window memsh kept
// 24,576 bytes less a sliding layer in fp32, checked against these rows).
// Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestCWMSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "cwm-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{424_708, 704_772, 1_009_412}},
		{"fp32", "eager", [3]int64{448_260, 776_452, 1_104_644}},
		{"bf16", "sdpa", [3]int64{271_108, 428_292, 597_764}},
		{"bf16", "eager", [3]int64{315_140, 528_644, 742_148}},
	})
}

// cwm under a release before models/cwm is refused, naming the release;
// mlp_bias biases the MLP and attention_bias nothing (CwmAttention's
// projections are unbiased; CwmConfig has no such field); without
// layer_types, CwmConfig's pattern (full where i % 4 == 0); what
// CwmConfig or CwmModel refuses is refused naming its key. Each edit's
// count is the one transformers 5.25.0 builds on the meta device from
// the edited file (143,808; 144,768; 143,808; 127,424; 143,808), each
// refusal one it makes (CwmConfig's strict int fields, its
// validate_architecture; a KeyError on an unknown layer type in
// CwmModel.forward; its sliding mask made every forward).
func TestCWMConfig(t *testing.T) {
	tiny := string(readHF(t, "cwm-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.6"})
	if err == nil || !strings.Contains(err.Error(), `model_type "cwm" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.6: error %v, want one naming 5.0", err)
	}
	// A layer: q and o_proj 64 x 64, k and v 64 x 32, an MLP of
	// 3 x 64 x 128, two norms of 64; the embeddings and head 256 x 64.
	const layer, embed = 2*64*64 + 2*64*32 + 3*64*128 + 2*64, 256 * 64
	const all = 3*layer + 2*embed + 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", all},
		{"mlp_bias", `"mlp_bias": false`, `"mlp_bias": true`, all + 3*(2*128+64)},
		{"attention_bias is not read", `"mlp_bias": false`, `"mlp_bias": false, "attention_bias": true`, all},
		{"tied", `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, all - embed},
		{"CwmConfig's layer pattern", `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],`, ``, all},
	})
	const types = `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]`
	checkEditedRefused(t, tiny, []configRefusal{
		{"null head_dim", `"head_dim": 16`, `"head_dim": null`, `"head_dim" must be an integer`},
		{"null kv heads", `"num_key_value_heads": 2`, `"num_key_value_heads": null`, `"num_key_value_heads" must be an integer`},
		{"heads not dividing hidden", `"num_attention_heads": 4`, `"num_attention_heads": 6`, `"hidden_size" (64) is not a multiple of num_attention_heads (6): CwmConfig refuses it`},
		{"null window", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window" is null: transformers 5.25.0's CwmModel`},
		{"no window", `"sliding_window": 16`, `"sliding_window": 0`, `"sliding_window" must be positive`},
		{"an unknown layer type", types, `"layer_types": ["sliding_attention", "chunked_attention", "sliding_attention"]`, `"layer_types" names an attention type memsh does not know`},
	})
	full := strings.Replace(tiny, types, `"layer_types": ["full_attention", "full_attention", "full_attention"]`, 1)
	checkEditedRefused(t, full, []configRefusal{
		{"null window, full layers", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window" is null`},
		{"no window, full layers", `"sliding_window": 16`, `"sliding_window": 0`, `"sliding_window" must be positive`},
	})
}
