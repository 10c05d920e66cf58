package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// StarCoder2's parameters, which transformers 5.25.0 counts on the meta
// device for starcoder2-{3b,7b,15b}.json (AutoModelForCausalLM.from_config
// under torch.device("meta"), summing numel; the files carry the
// published config.json's fields, which set no tie_word_embeddings: the
// head is tied, Starcoder2Config's default; the hub is not reachable from
// here): 3,030,371,328 and 7,173,923,840, the 3B's and 7B's cards' 3.03B
// and 7.17B; 15,655,899,136 for the 15B. starcoder2-tiny.json: 108,160.
// Every projection and norm is biased (use_bias, nn.LayerNorm).
func TestStarcoder2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"starcoder2-3b.json":   3_030_371_328,
		"starcoder2-7b.json":   7_173_923_840,
		"starcoder2-15b.json":  15_655_899_136,
		"starcoder2-tiny.json": 108_160,
	})
}

// What StarCoder2's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// starcoder2-tiny.json (64 wide, 4 heads of 16, 2 kv heads, intermediate
// 256, gelu_pytorch_tanh, sliding_window 16 in every layer, dropouts 0), 2
// samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/starcoder2-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Per layer two nn.LayerNorms (input, mean and rstd each), q, k, v and o
// biased, c_fc, the tanh GELU's input and c_proj's; SDPA gets the
// window's bool mask (no enable_gqa: k and v repeated). Under full
// checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestStarcoder2SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"starcoder2-tiny.json", "fp32", "sdpa", 376_324, 648_708},
		{"starcoder2-tiny.json", "fp32", "eager", 399_876, 695_812},
		{"starcoder2-tiny.json", "bf16", "sdpa", 221_956, 358_660},
		{"starcoder2-tiny.json", "bf16", "eager", 265_988, 446_724},
	})
}

// starcoder2 under a release before models/starcoder2 is refused, naming
// the release; use_bias false drops the six biases of a layer (q, k, v,
// o, c_fc, c_proj) but not the LayerNorms'; the MLP's projections are
// c_fc and c_proj.
func TestStarcoder2Config(t *testing.T) {
	tiny := string(readHF(t, "starcoder2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.38.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "starcoder2" needs transformers 4.39 or later`) {
		t.Errorf("transformers 4.38.2: error %v, want one naming 4.39", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"use_bias": true`, `"use_bias": false`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	// per layer q 64 + k 32 + v 32 + o 64 + c_fc 256 + c_proj 64
	if got, want := m.Params(), int64(108_160-2*(64+32+32+64+256+64)); got != want {
		t.Errorf("use_bias false: %d parameters, want %d", got, want)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range prog.Params {
		names[p.Name] = true
	}
	for _, want := range []string{"model.layers.0.mlp.c_fc.weight", "model.layers.0.mlp.c_proj.weight", "model.layers.0.input_layernorm.bias"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}

// With the published dropouts (starcoder2-tiny-dropout.json: 0.1 each) a
// layer keeps three masks more, the probabilities' (2 x 4 heads x 32 x
// 32) and o_proj's and c_proj's outputs' (2 x 32 x 64 each), and the
// model one, the embeddings' (2 x 32 x 64):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/starcoder2-tiny-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 514,564 / 908,804, bf16 306,948 / 520,452 (checkCPUDropout).
func TestStarcoder2DropoutMasks(t *testing.T) {
	checkCPUDropout(t, "starcoder2-tiny-dropout.json", 2*4*32*32+2*2*32*64, 2*32*64, []cpuDropout{
		{"fp32", 4, 514_564, 908_804},
		{"bf16", 2, 306_948, 520_452},
	})
}
