package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// OLMoE's parameter count: the hub's safetensors total of
// allenai/OLMoE-1B-7B-0924 (and its -Instruct, whose three safetensors
// headers sum to 6,919,161,856 parameters in public verification logs;
// llama.cpp's bench of olmoe-1b-7b-0924-instruct reports the same
// n_params), which transformers 5.25.0 also counts on the meta device for
// olmoe-1b-7b-0924.json (torch 2.15.0, /work/venv-t):
//
//	with torch.device("meta"): OlmoeForCausalLM(AutoConfig.for_model(**config))
//
// The config's sizes are the model card's and Megatron-Bridge's OLMoE
// page's: hidden 2048, 16 layers of 16 heads (16 kv), 64 experts of 1024,
// top 8, vocab 50,304, untied.
func TestOlmoeParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"olmoe-1b-7b-0924.json": 6_919_161_856,
		"olmoe-tiny.json":       107_520, // transformers 5.25.0 on the meta device, as below
	})
}

// What OlmoeAttention cannot run or memsh does not model is refused,
// naming the key: a head_dim other than hidden_size / num_attention_heads
// (its norms are sized from hidden_size) and clip_qkv's in-place clamps
// (tensor parallelism: TestWideQKNormRefusesTP).
func TestOlmoeRefuses(t *testing.T) {
	tiny := string(readHF(t, "olmoe-tiny.json"))
	for _, tc := range []struct{ edit, want string }{
		{`"head_dim": 32,`, `"head_dim" (32) must be hidden_size / num_attention_heads (16)`},
		{`"clip_qkv": 8.0,`, `"clip_qkv" = 8.0 is not modelled`},
	} {
		cfg := strings.Replace(strings.Replace(tiny, `"clip_qkv": null,`, "", 1), "{", "{"+tc.edit, 1)
		if _, err := hf.FromConfig([]byte(cfg), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.edit, err, tc.want)
		}
	}
}

// What OLMoE keeps for backward, against transformers 5.25.0 on PyTorch
// 2.15.0 (the CPU, no autocast, default experts_implementation:
// grouped_mm): olmoe-tiny.json (64 wide, 4 heads of 16, 2 kv heads, 4
// experts of 32, top 2, vocab 256, untied), 2 samples of 32 tokens, 1 and
// 2 layers (parameters counted on the meta device: 107,520 for 2):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/olmoe-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// A layer keeps q_norm's and k_norm's inputs and rsqrt over all the
// heads (Llama's RMSNorm: the rows cast back before the weight), the
// rotary products, the kernel's saves and Qwen3-MoE's router and
// grouped_mm experts. Checkpointed: TestGraniteCheckpointSavesAsTransformers.
func TestOlmoeSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"olmoe-tiny.json", "fp32", "sdpa", 455444, 790820},
		{"olmoe-tiny.json", "fp32", "eager", 503572, 887076},
		{"olmoe-tiny.json", "bf16", "sdpa", 301588, 501540},
		{"olmoe-tiny.json", "bf16", "eager", 357908, 614180},
	})
}
