package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestGemmaNormSavesAsTransformers: Gemma 2 and Gemma 3 whole, as
// transformers runs them on the CPU (bf16, torch 2.15.0): what autograd
// saves in two layers (layer 0 local, layer 1 global) of
// gemma2-tiny.json and gemma3-tiny.json, per
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/CONFIG 2 1 SEQ bfloat16 ATTN nocache
//
// under 5.25.0 (Gemma 2's SDPA under 5.20.0, its last release with one).
// Their RMSNorms (and Gemma 3's q_norm and k_norm) run in fp32 and scale
// by 1 + weight before the cast back, keeping the fp32 rows and the fp32
// 1 + weight (nn.GemmaNorm): lowered as Llama's, memsh kept 128 bytes a
// token less per norm (a bf16 row for an fp32 one) and 256 per norm
// (Gemma 2 at 64 tokens: 822,532 for 902,670 eager). memsh counts all
// but what the harness sees outside the layers, the 0-dim embed_scale (2
// bytes); the loss's padded labels (core's loss_labels.go) and the rotary
// cos and sin made once a forward (Gemma 2's one pair, Gemma 3's two,
// global and local) it counts (Attention.RopeTables).
func TestGemmaNormSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, attn, version string
		seq, measured       int64
	}{
		{"gemma2-tiny.json", "eager", "5.25.0", 8, 86_190},
		{"gemma2-tiny.json", "eager", "5.25.0", 16, 178_254},
		{"gemma2-tiny.json", "eager", "5.25.0", 64, 902_670},
		{"gemma2-tiny.json", "sdpa", "5.20.0", 64, 626_190},
		{"gemma3-tiny.json", "eager", "5.25.0", 8, 94_510},
		{"gemma3-tiny.json", "eager", "5.25.0", 64, 910_094},
		{"gemma3-tiny.json", "sdpa", "5.25.0", 64, 699_150},
		{"gemma3-tiny.json", "sdpa", "5.25.0", 16, 176_718},
	} {
		want := tc.measured - 2
		if got := cpuSaved(t, tc.file, hf.Options{Attn: tc.attn, Transformers: tc.version}, 1, tc.seq); got != want {
			t.Errorf("%s, %s, %d tokens: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.attn, tc.seq, got, want, got-want)
		}
	}
}

// What one Gemma, Gemma 2 and Gemma 3 decoder layer keeps for backward,
// in bf16 and fp32, against transformers 5.25.0 on PyTorch 2.15.0 (the
// CPU, no autocast): gemma-tiny.json, gemma2-tiny.json and
// gemma3-tiny.json (64 wide, 4 heads of 16, 2 kv heads, intermediate
// 128; layer 1 is global in Gemma 2 and 3), 1 sample of 64 tokens, a
// layer's bytes the difference of 2 layers and 1:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/FILE.json {1,2} 1 64 {bfloat16,float32} {sdpa,eager} nocache
//
// fp32: gemma sdpa 685,584 - 405,008, eager 847,376 - 485,904; gemma2
// eager 1,177,104 - 683,536; gemma3_text sdpa 928,528 - 522,384, eager
// 1,090,320 - 603,280. bf16: gemma sdpa 460,302 - 286,222, eager
// 671,246 - 391,694; gemma2 eager 902,670 - 523,790; gemma3_text sdpa
// 699,150 - 403,598, eager 910,094 - 509,070 (5.25 refuses Gemma 2 under
// SDPA). In fp32 Gemma's norms keep what Llama's keep and the fp32
// 1 + weight; Gemma 3's global layer is the first to read the global
// rotary cos and sin ([1, 64, 16] each: 4,096 bytes in bf16), which it
// saves (Attention.RopeTables).
func TestGemmaLayerSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision, attn string
		want                  int64
	}{
		{"gemma-tiny.json", "fp32", "sdpa", 685_584 - 405_008},
		{"gemma-tiny.json", "fp32", "eager", 847_376 - 485_904},
		{"gemma-tiny.json", "bf16", "sdpa", 460_302 - 286_222},
		{"gemma-tiny.json", "bf16", "eager", 671_246 - 391_694},
		{"gemma2-tiny.json", "fp32", "eager", 1_177_104 - 683_536},
		{"gemma2-tiny.json", "bf16", "eager", 902_670 - 523_790},
		{"gemma3-tiny.json", "fp32", "sdpa", 928_528 - 522_384},
		{"gemma3-tiny.json", "fp32", "eager", 1_090_320 - 603_280},
		{"gemma3-tiny.json", "bf16", "sdpa", 699_150 - 403_598},
		{"gemma3-tiny.json", "bf16", "eager", 910_094 - 509_070},
	} {
		prec, err := core.LookupPrecision(tc.precision)
		if err != nil {
			t.Fatal(err)
		}
		if got := gemmaLayerSaved(t, tc.file, tc.attn, func(p *core.Plan) { p.Precision = prec }); got != tc.want {
			t.Errorf("%s %s %s: a layer keeps %d bytes, transformers %d (%+d)", tc.file, tc.precision, tc.attn, got, tc.want, got-tc.want)
		}
	}
}

// TestGemmaNormLiger: under Liger's kernels Gemma's norms are Liger's
// RMSNorm (LigerRMSNormForGemma3, as for Llama), which keeps the bf16
// input and one fp32 1/rms a row where GemmaRMSNorm keeps the fp32 input,
// rsqrt, fp32 rows and the fp32 1 + weight. One layer of gemma3-tiny at
// 64 tokens in bf16, by hand: each of the four 64-wide norms 33,280
// (16,384 + 256 + 16,384 + 256) against 8,448 (8,192 + 256); q_norm over
// 256 rows of 16 33,856 (16,384 + 1,024 + 16,384 + 64) against 9,216;
// k_norm over 128 rows 16,960 against 4,608: 136,320 bytes less.
func TestGemmaNormLiger(t *testing.T) {
	eager := gemmaLayerSaved(t, "gemma3-tiny.json", "sdpa", func(*core.Plan) {})
	liger := gemmaLayerSaved(t, "gemma3-tiny.json", "sdpa", func(p *core.Plan) { p.LigerKernels = true })
	if d := eager - liger; d != 136_320 {
		t.Errorf("Liger's norms keep %d bytes less a layer, want 136,320", d)
	}
}

// gemmaLayerSaved is what the second layer of a tiny two-layer config
// keeps (2 layers' saved bytes less 1 layer's) on the CPU runtime, 1
// sample of 64 tokens in bf16 unless set changes the plan.
func gemmaLayerSaved(t *testing.T, file, attn string, set func(*core.Plan)) int64 {
	t.Helper()
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	saved := int64(0)
	for _, layers := range []string{"2", "1"} {
		cfg := strings.Replace(string(readHF(t, file)), `"num_hidden_layers": 2`, `"num_hidden_layers": `+layers, 1)
		m, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: attn})
		if err != nil {
			t.Fatal(file, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = cpu, 1, 64
		set(p)
		r := evalPlan(t, p).SavedActivations
		if layers == "1" {
			r = -r
		}
		saved += r
	}
	return saved
}
