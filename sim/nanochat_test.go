package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// NanoChat's parameters, which transformers 5.25.0 counts on the meta
// device (the first line of `/work/venv-t/bin/python
// tools/oracle/hf_defaults.py --only FILE`): nanochat-tiny.json 122,880
// (64 wide, 4 heads of 16 over 2 kv heads, fc1/fc2 of 256, vocab 256
// untied, no norm weights); nanochat-defaults.json 256,573,440,
// NanoChatConfig() written out (768 wide, 12 layers of 6 heads, fc1/fc2
// of 8192, vocab 50,304 untied; karpathy/nanochat-d32's config.json and
// card were not reachable from here).
func TestNanoChatParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"nanochat-tiny.json":     122_880,
		"nanochat-defaults.json": 256_573_440,
	})
}

// What NanoChat keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): nanochat-tiny.json, 2 samples of
// 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/nanochat-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Weightless fp32 RMSNorms (the model's norm before the layers too), q
// and k normed after the rope, a squared-ReLU fc1/fc2 MLP and the logits
// soft-capped at 15.
func TestNanoChatSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"nanochat-tiny.json", "fp32", "sdpa", 459_268, 732_676},
		{"nanochat-tiny.json", "fp32", "eager", 507_396, 828_932},
		{"nanochat-tiny.json", "bf16", "sdpa", 309_764, 476_676},
		{"nanochat-tiny.json", "bf16", "eager", 366_084, 589_316},
	})
}

// NanoChat's gate and keys: nanochat under 5.0 is refused (the 5.0.0 wheel
// is the first with models/nanochat); attention_bias biases q, k, v and o
// (Qwen3Attention), head_dim narrows the heads, tie_word_embeddings ties
// the head, as transformers 5.25.0 counts them on the meta device
// (123,264, 110,592, 106,496); final_logit_softcapping is 15 left out and
// off when null (NanoChatConfig's default; Gemma2ForCausalLM skips a None).
func TestNanoChatConfig(t *testing.T) {
	tiny := string(readHF(t, "nanochat-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.6"})
	if err == nil || !strings.Contains(err.Error(), `model_type "nanochat" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.6: error %v, want one naming 5.0", err)
	}
	for _, c := range []struct {
		old, new string
		want     int64
	}{
		{`"attention_bias": false`, `"attention_bias": true`, 123_264},
		{`"hidden_size": 64`, `"head_dim": 8, "hidden_size": 64`, 110_592},
		{`"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 106_496},
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, c.old, c.new, 1)), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != c.want {
			t.Errorf("%s: %d parameters, want %d", c.new, got, c.want)
		}
	}
	for edit, want := range map[string]float64{
		`"final_logit_softcapping": 15.0`: 15,
		`"final_logit_softcapping": null`: 0,
		`"final_logit_softcapping": 30.0`: 30,
		``:                                15, // left out: the default
	} {
		data := strings.Replace(tiny, `"final_logit_softcapping": 15.0,`, edit+",", 1)
		if edit == "" {
			data = strings.Replace(tiny, `"final_logit_softcapping": 15.0,`, "", 1)
		}
		m, err := hf.FromConfig([]byte(data), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if m.LogitSoftcap != want {
			t.Errorf("%s: logits soft-capped at %g, want %g", edit, m.LogitSoftcap, want)
		}
	}
}
