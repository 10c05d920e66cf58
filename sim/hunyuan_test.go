package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Hunyuan-7B's parameters: 7,504,568,320 (the card's 7.5B), which
// transformers 5.25.0 counts on the meta device for
// hunyuan-7b-instruct.json (AutoModelForCausalLM.from_config under
// torch.device("meta"), summing numel; the published sizes, 32 layers of
// 4096, 32 heads, 8 kv heads, intermediate 14336, 128,167 tied
// embeddings, with "head_dim": 128 added: transformers 5.25.0 cannot
// build the published config without it, HunYuanDenseV1Config's head_dim
// defaulting to None). hunyuan_v1_dense-tiny.json: 90,496.
func TestHunyuanDenseParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"hunyuan-7b-instruct.json":   7_504_568_320,
		"hunyuan_v1_dense-tiny.json": 90_496,
	})
}

// What Hunyuan's dense decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// hunyuan_v1_dense-tiny.json (64 wide, 4 heads of 16, 2 kv heads,
// intermediate 128), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hunyuan_v1_dense-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Qwen3's saves with the per-head norms after the rotary embedding
// (query_layernorm, key_layernorm) instead of before it: the norms keep
// the rotated q and k where Qwen3's keep the projections' outputs, the
// same bytes. Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestHunyuanDenseSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"hunyuan_v1_dense-tiny.json", "fp32", "sdpa", 450_820, 781_572},
		{"hunyuan_v1_dense-tiny.json", "fp32", "eager", 498_948, 877_828},
		{"hunyuan_v1_dense-tiny.json", "bf16", "sdpa", 297_220, 492_804},
		{"hunyuan_v1_dense-tiny.json", "bf16", "eager", 353_540, 605_444},
	})
}

// hunyuan_v1_dense without head_dim is refused naming it (transformers
// 5.25.0 fails), as is a release before 4.55.
func TestHunyuanDenseConfig(t *testing.T) {
	tiny := string(readHF(t, "hunyuan_v1_dense-tiny.json"))
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"head_dim": 16,`, "", 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), `"head_dim" must be given`) {
		t.Errorf("no head_dim: error %v", err)
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.54.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hunyuan_v1_dense" needs transformers 4.55 or later`) {
		t.Errorf("transformers 4.54.1: error %v, want one naming 4.55", err)
	}
}
