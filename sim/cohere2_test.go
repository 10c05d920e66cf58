package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Cohere 2's parameters, which transformers 5.25.0 counts on the meta
// device for c4ai-command-r7b-12-2024.json and command-a-03-2025.json
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; the files carry the published sizes, the hub not reachable from
// here): 8,028,033,024 for Command R7B (32 layers of 4096, 32 heads, 8 kv
// heads, intermediate 14336, 256,000 tied embeddings: the card's 8.03B)
// and 111,057,580,032 for Command A (64 layers of 12288, 96 heads, 8 kv
// heads, intermediate 36864: the card's 111B). cohere2-tiny.json: 127,232.
func TestCohere2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"c4ai-command-r7b-12-2024.json": 8_028_033_024,
		"command-a-03-2025.json":        111_057_580_032,
		"cohere2-tiny.json":             127_232,
	})
}

// What Cohere 2's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): cohere2-tiny.json (64
// wide, 4 heads of 16, 2 kv heads, intermediate 128, sliding_window 16;
// layer 0 sliding with rope, layer 1 full without), 2 samples of 32
// tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere2-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Per layer one Cohere2LayerNorm (nn.CohereNorm: two fp32 copies of the
// centred rows, the fp32 rsqrt and normalised rows, in bf16 the weight's
// fp32 copy) whose output the attention and the MLP both read; the final
// norm the same; the logits' product by logit_scale after the head.
// Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestCohere2SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"cohere2-tiny.json", "fp32", "sdpa", 408_068, 655_108},
		{"cohere2-tiny.json", "fp32", "eager", 431_620, 726_788},
		{"cohere2-tiny.json", "bf16", "sdpa", 287_748, 436_740},
		{"cohere2-tiny.json", "bf16", "eager", 331_780, 537_092},
	})
}

// cohere2 under a release before models/cohere2 is refused; head_dim is
// hidden_size / num_attention_heads whatever the config says; a
// non-positive logit_scale is refused naming the key.
func TestCohere2Config(t *testing.T) {
	tiny := string(readHF(t, "cohere2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.47.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "cohere2" needs transformers 4.48 or later`) {
		t.Errorf("transformers 4.47.1: error %v, want one naming 4.48", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"hidden_act"`, `"head_dim": 32, "hidden_act"`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 127_232 {
		t.Errorf("head_dim 32: %d parameters, want 127,232 (Cohere2Config ignores head_dim)", got)
	}
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"logit_scale": 0.25`, `"logit_scale": 0`, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), `"logit_scale" must be a positive number`) {
		t.Errorf("logit_scale 0: error %v", err)
	}
}
