package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// HRM-Text's parameters on the meta device (transformers 5.25.0, torch
// 2.15.0; hf_block_saved.py's param_bytes / 4 at 2 layers a stack):
// hrm_text-tiny.json 213,056 (64 wide, 4 heads of 16 for q, k, v and the
// gate, MLP 128, vocab 256, untied: 2 x 16,384 embeddings, z_L_init 64,
// 2 stacks x 2 layers x 45,056); hrm_text-cycles-tiny.json 199,232 (the
// same with every projection biased, 45,696 a layer, and the head tied);
// hrm_text-defaults.json 1,447,822,848, HrmTextConfig()'s defaults as
// save_pretrained writes them (num_hidden_layers 128 beside
// num_layers_per_stack 16), whose docstring names sapientinc/HRM-Text-1B
// (1536 wide, 16 layers a stack, 12 heads of 128, MLP 4096, 151,808
// untied embeddings; the hub's config.json was not at hand, and a
// third-party summary gives it a 65k vocabulary: its count is not
// stated here).
func TestHrmTextParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"hrm_text-tiny.json":        213_056,
		"hrm_text-cycles-tiny.json": 199_232,
		"hrm_text-defaults.json":    1_447_822_848,
	})
}

// What HRM-Text's recurrent step keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast), 2 samples of 32
// tokens, LAYERS the layers of each stack (the harness sets
// num_layers_per_stack):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hrm_text-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hrm_text-cycles-tiny.json {1,2,3} 2 32 {float32 sdpa,bfloat16 eager} nocache
//
// hrm_text-tiny.json (2 H cycles of 3 L calls, L_bp_cycles [2]: 1, then
// 2 L calls with grad, so 3 L and 2 H calls keep their layers): fp32
// sdpa 1,652,484 / 3,134,724 / 4,616,964, eager 1,811,204 / 3,452,164 /
// 5,093,124; bf16 sdpa 986,884 / 1,813,764 / 2,640,644, eager 1,227,524 /
// 2,295,044 / 3,362,564. hrm_text-cycles-tiny.json (3 H cycles of 2 L
// calls, L_bp_cycles [0, 5] padded to [1, 0, 5]: 1, none, then both L
// calls with grad; biases, tied head, embedding_scale 8): fp32 sdpa
// 1,965,572 / 3,744,260 / 5,522,948, bf16 eager 1,457,668 / 2,738,692 /
// 4,019,716. param_bytes and grad_bytes at 3 layers: fp32 1,212,672 and
// 1,212,416 (z_L_init has no gradient), bf16 606,336 and 606,208.
func TestHrmTextSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "hrm_text-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{1_652_484, 3_134_724, 4_616_964}},
		{"fp32", "eager", [3]int64{1_811_204, 3_452_164, 5_093_124}},
		{"bf16", "sdpa", [3]int64{986_884, 1_813_764, 2_640_644}},
		{"bf16", "eager", [3]int64{1_227_524, 2_295_044, 3_362_564}},
	})
	checkSavedDepths(t, "hrm_text-cycles-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{1_965_572, 3_744_260, 5_522_948}},
		{"bf16", "eager", [3]int64{1_457_668, 2_738_692, 4_019_716}},
	})
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 1_212_672, 1_212_416}, {"bf16", 606_336, 606_208}} {
		r := evalPlan(t, hfSavedPlan(t, "hrm_text-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// With every decoder layer checkpointed (use_reentrant=False), each call:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hrm_text-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache ckpt held
//
// fp32 248,068 / 329,988 / 411,908, bf16 198,916 / 239,876 / 280,836:
// each of the 5 calls with grad keeps its layers' inputs (16,384 bytes a
// layer in fp32), besides the final norms' and the loss's; held, the
// rotary cos and sin and the position_ids (4,096 + 256 in fp32, 2,048 +
// 256 in bf16), as TestGraniteCheckpointSavesAsTransformers says.
func TestHrmTextCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [3]int64
		tables    int64
	}{
		{"fp32", [3]int64{248_068, 329_988, 411_908}, 4096 + 256},
		{"bf16", [3]int64{198_916, 239_876, 280_836}, 2048 + 256},
	} {
		for i, want := range tc.saved {
			if got := graniteSaved(t, "hrm_text-tiny.json", i+1, tc.precision, "sdpa", true); got != want+tc.tables {
				t.Errorf("%s, %d layers: %d saved, want %d (%+d)", tc.precision, i+1, got, want+tc.tables, got-want-tc.tables)
			}
		}
	}
}

// hrm_text under 5.9 is refused (models/hrm_text came with 5.9.0: absent
// from the 5.8.0 wheel; unzip -l); flash attention with prefix_lm (its
// default) is refused as transformers refuses it, and runs without;
// num_layers_per_stack, which transformers writes beside the inflated
// num_hidden_layers, wins; a hidden size the heads do not divide and
// nonsense cycles are refused naming the key.
func TestHrmTextConfig(t *testing.T) {
	tiny := string(readHF(t, "hrm_text-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.8.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hrm_text" needs transformers 5.9 or later`) {
		t.Errorf("transformers 5.8.0: error %v, want one naming 5.9", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil || !strings.Contains(err.Error(), `"prefix_lm" is true`) {
		t.Errorf("flash with prefix_lm: error %v", err)
	}
	if _, err := hf.FromConfig(readHF(t, "hrm_text-cycles-tiny.json"), "flash"); err != nil {
		t.Errorf("flash without prefix_lm: %v", err)
	}
	// As HrmTextConfig().save_pretrained writes them: 2 layers a stack, 16
	// cache slots.
	saved := strings.Replace(tiny, `"num_hidden_layers": 2`, `"num_hidden_layers": 16, "num_layers_per_stack": 2`, 1)
	m, err := hf.FromConfig([]byte(saved), "sdpa")
	if err != nil || m.Params() != 213_056 {
		t.Errorf("num_layers_per_stack 2: %v, %v parameters, want 213,056", err, m)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"hidden_size": 64`, `"hidden_size": 66`, `"hidden_size" (66) is not a multiple of num_attention_heads`},
		{`"L_cycles": 3`, `"L_cycles": 0`, `"L_cycles" must be positive`},
		{`"H_cycles": 2`, `"H_cycles": 10000000`, `"H_cycles" x (L_cycles + 1)`},
		{`"L_cycles": 3`, `"L_cycles": 3, "L_bp_cycles": [1.5]`, `"L_bp_cycles" must be a list of integers`},
		{`"L_cycles": 3`, `"L_cycles": 3, "initializer_range": 0`, `"initializer_range" must be in (0, 1]`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
}

// With use_cache (HrmTextConfig's default; the harness sets the cache's
// num_hidden_layers slots, LAYERS x H_cycles x (L_cycles + 1)): every
// call of a stack, under no_grad too, appends its k and v to its own
// slot of the DynamicCache, and the kernel reads those copies:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hrm_text-tiny.json {1,2} 2 32 {float32 sdpa,bfloat16 eager}
//
// saved as without the cache (heads all key heads: no repeat_kv copy is
// kept beside them): fp32 sdpa 1,652,484 / 3,134,724, bf16 eager
// 1,227,524 / 2,295,044.
func TestHrmTextCacheSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [2]int64
	}{
		{"fp32", "sdpa", [2]int64{1_652_484, 3_134_724}},
		{"bf16", "eager", [2]int64{1_227_524, 2_295_044}},
	} {
		for i, want := range tc.saved {
			p := hfSavedPlan(t, "hrm_text-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn}, false)
			p.UseCache = true
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s, %d layers, use_cache: %d saved, want %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}
