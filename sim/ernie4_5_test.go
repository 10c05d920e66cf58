package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// ERNIE-4.5-0.3B-PT's parameters: 360,748,032, which transformers 5.25.0
// counts on the meta device for ernie-4.5-0.3b-pt.json
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; the file carries the published config.json's fields, written
// for the native Ernie4_5ForCausalLM without the remote-code auto_map;
// the hub is not reachable from here): 18 layers of 1024, 16 heads of
// 128, 2 kv heads, intermediate 3072, 103,424 tied embeddings, no bias.
// ernie4_5-tiny.json: 90,432 by the same count.
func TestErnie45Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"ernie-4.5-0.3b-pt.json": 360_748_032,
		"ernie4_5-tiny.json":     90_432,
	})
}

// What ERNIE 4.5's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// ernie4_5-tiny.json (64 wide, 4 heads of 16, 2 kv heads, intermediate
// 128), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/ernie4_5-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Per layer Llama's saves but the rope's: each layer repeat_interleaves
// the first half of rotary_emb's fp32 cos and sin into its own fp32 pair,
// [1, 1, 32, 16] each, which q.float() * cos and rotate_half(q).float() *
// sin save whatever the model's dtype (bf16 included). Under full
// checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestErnie45SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"ernie4_5-tiny.json", "fp32", "sdpa", 400_132, 684_292},
		{"ernie4_5-tiny.json", "fp32", "eager", 448_260, 780_548},
		{"ernie4_5-tiny.json", "bf16", "sdpa", 260_868, 422_148},
		{"ernie4_5-tiny.json", "bf16", "eager", 317_188, 534_788},
	})
}

// ernie4_5 under a release before models/ernie4_5 is refused, naming the
// release that builds it; use_bias biases all seven projections of a
// layer (Ernie4_5Attention's four, Ernie4_5MLP's three) and
// attention_dropout, which Ernie4_5Attention overrides with 0.0, adds no
// dropout.
func TestErnie45Config(t *testing.T) {
	tiny := string(readHF(t, "ernie4_5-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.53.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "ernie4_5" needs transformers 4.54 or later`) {
		t.Errorf("transformers 4.53.3: error %v, want one naming 4.54", err)
	}
	biased, err := hf.FromConfig([]byte(strings.Replace(tiny, `"use_bias": false`, `"use_bias": true`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	// per layer q 64 + k 32 + v 32 + o 64 + gate 128 + up 128 + down 64
	if got, want := biased.Params(), int64(90_432+2*(64+32+32+64+128+128+64)); got != want {
		t.Errorf("use_bias: %d parameters, want %d", got, want)
	}
	saved := func(cfg string) int64 {
		m, err := hf.FromConfig([]byte(cfg), "eager")
		if err != nil {
			t.Fatal(err)
		}
		return evalPlan(t, tinyPlan(t, m)).SavedActivations
	}
	drop := strings.Replace(tiny, `"head_dim": 16,`, `"head_dim": 16, "attention_dropout": 0.5,`, 1)
	if got, want := saved(drop), saved(tiny); got != want {
		t.Errorf("attention_dropout 0.5: saves %d bytes, without it %d (Ernie4_5Attention has none)", got, want)
	}
}
