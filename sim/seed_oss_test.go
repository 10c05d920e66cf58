package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Seed-OSS-36B's parameters: 36,151,104,512 (the model card's 36.2B),
// which transformers 5.25.0 counts on the meta device for
// seed-oss-36b-instruct.json (AutoModelForCausalLM.from_config under
// torch.device("meta"), summing numel; the file carries the published
// config.json's fields, the hub not reachable from here): 64 layers of
// 5120, 80 heads of 128, 8 kv heads, q, k and v biased, intermediate
// 27648, 155,136 untied embeddings. seed_oss-tiny.json: 107,072 by the
// same count.
func TestSeedOSSParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"seed-oss-36b-instruct.json": 36_151_104_512,
		"seed_oss-tiny.json":         107_072,
	})
}

// What Seed-OSS's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): seed_oss-tiny.json (64
// wide, 4 heads of 16, 2 kv heads, intermediate 128, dropouts 0), 2
// samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/seed_oss-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's saves: the q, k and v biases save nothing more.
func TestSeedOSSSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"seed_oss-tiny.json", "fp32", "sdpa", 400_132, 680_196},
		{"seed_oss-tiny.json", "fp32", "eager", 448_260, 776_452},
		{"seed_oss-tiny.json", "bf16", "sdpa", 258_820, 416_004},
		{"seed_oss-tiny.json", "bf16", "eager", 315_140, 528_644},
	})
}

// seed_oss under a release before models/seed_oss is refused, naming the
// release; attention_out_bias biases o_proj and mlp_bias the MLP's three
// projections.
func TestSeedOSSConfig(t *testing.T) {
	tiny := string(readHF(t, "seed_oss-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.55.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "seed_oss" needs transformers 4.56 or later`) {
		t.Errorf("transformers 4.55.4: error %v, want one naming 4.56", err)
	}
	biased := strings.Replace(strings.Replace(tiny, `"attention_out_bias": false`, `"attention_out_bias": true`, 1), `"mlp_bias": false`, `"mlp_bias": true`, 1)
	m, err := hf.FromConfig([]byte(biased), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	// per layer o 64 + gate 128 + up 128 + down 64
	if got, want := m.Params(), int64(107_072+2*(64+128+128+64)); got != want {
		t.Errorf("attention_out_bias, mlp_bias: %d parameters, want %d", got, want)
	}
}

// With the published dropouts (seed_oss-tiny-dropout.json:
// attention_dropout and residual_dropout 0.1) a layer keeps three masks
// more: the attention probabilities' (2 x 4 heads x 32 x 32) and o_proj's
// and down_proj's outputs' (2 x 32 x 64 each), 16,384 elements.
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/seed_oss-tiny-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 546,564 / 973,060, bf16 347,908 / 594,180 (checkCPUDropout).
func TestSeedOSSDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "seed_oss-tiny-dropout.json", 2*4*32*32+2*2*32*64, 0, []cpuDropout{
		{"fp32", 4, 546_564, 973_060},
		{"bf16", 2, 347_908, 594_180},
	})
}

// cpuDropout is what transformers' eager attention keeps on the CPU for
// 1 and 2 layers of a tiny model with dropouts, in a dtype of itemsize
// bytes.
type cpuDropout struct {
	precision string
	itemsize  int64
	one, two  int64
}

// checkCPUDropout checks memsh's eager saves of file against the CPU's:
// there torch's _dropout_impl keeps each mask as a noise tensor in the
// input's dtype, where CUDA's native_dropout, which memsh lowers, keeps a
// bool one: itemsize - 1 bytes more an element, of perLayer elements a
// layer and once more before the layers (the embeddings'). CPU SDPA with
// dropout takes the math path, so only eager compares.
func checkCPUDropout(t *testing.T, file string, perLayer, once int64, rows []cpuDropout) {
	t.Helper()
	for _, tc := range rows {
		noise := func(layers int64) int64 { return (tc.itemsize - 1) * (perLayer*layers + once) }
		one := graniteSaved(t, file, 1, tc.precision, "eager", false)
		two := graniteSaved(t, file, 2, tc.precision, "eager", false)
		if one+noise(1) != tc.one || two+noise(2) != tc.two {
			t.Errorf("%s %s: 1 layer %d + %d, 2 layers %d + %d; transformers on the CPU %d, %d", file, tc.precision, one, noise(1), two, noise(2), tc.one, tc.two)
		}
	}
}
