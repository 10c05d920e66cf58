package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// DeepSeek-V4's parameters: transformers 5.25.0's DeepseekV4ForCausalLM
// on the meta device (AutoModelForCausalLM.from_config under
// torch.device("meta"), summing numel, quantization_config dropped):
//
//   - deepseek-v4-flash.json: deepseek-ai/DeepSeek-V4-Flash's config.json
//     as a public model report of the checkpoint copies it, with its
//     safetensors listing: 284,332,230,231. The listing's tensors, each
//     at its logical size (the fp4 experts' int8 [2048, 2048] hold
//     [2048, 4096]), less the fp8 scales, the 3 hash layers' tid2eid
//     and the 40 gate biases (buffers in transformers) and mtp.0 (not
//     built), sum to the same 284,332,230,231; the card says 284B.
//   - deepseek-v4-pro.json: deepseek-ai/DeepSeek-V4-Pro's config.json as
//     a public script copies it: 1,572,997,179,491 (the card's 1.6T).
//   - deepseek-v4-tiny.json (64 wide, 4 heads of 32, layers sliding,
//     CSA and HCA, hash MoE then top-k MoE): 204,291.
func TestDeepSeekV4Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"deepseek-v4-flash.json": 284_332_230_231,
		"deepseek-v4-pro.json":   1_572_997_179_491,
		"deepseek-v4-tiny.json":  204_291,
	})
}

// The lowered step registers every parameter the model holds, at a
// sequence shorter than a compressor's rate too: DeepSeek-V4-Flash's
// heavily compressed layers pool windows of 128 tokens, so at 64 no window
// is complete and neither the pooling nor kv_norm runs, yet
// named_parameters() lists their position_bias ([128, 512]) and
// kv_norm.weight (512) in every such layer (the survey: hf_names.py --all).
func TestDeepSeekV4ParamsShortSequence(t *testing.T) {
	for _, file := range []string{"deepseek-v4-flash.json", "deepseek-v4-tiny.json"} {
		m, err := hf.FromConfig(readHF(t, file), "eager")
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range []int64{2, 64} {
			p := tinyPlan(t, m)
			p.Seq = seq
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(file, err)
			}
			var lowered int64
			for _, pi := range prog.Params {
				if pi.TiedTo < 0 {
					lowered += pi.FullNumel
				}
			}
			if lowered != m.Params() {
				t.Errorf("%s at %d tokens: the step registers %d parameters, the model has %d", file, seq, lowered, m.Params())
			}
		}
	}
}

// What DeepSeek-V4's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, eager: the model has no
// other attention), deepseek-v4-tiny.json cut to 1, 2 and 3 layers (layer
// 0 sliding with hash routing, 1 compressed sparse with top-k routing, 2
// heavily compressed), 2 samples of 32 tokens, the experts as grouped_mm
// (transformers 5's default) and as its eager loop (experts="eager"):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache keepfp32 [eagerexperts]
//
// (kept; keepfp32 loads bf16 as from_pretrained does: the
// hyper-connections, sinks, position biases, norms and correction bias
// in fp32). The harness also counts parameters it takes for activations:
// views of a parameter at an offset, which its filter (data_ptr) misses.
// Each hyper-connection's scale.unbind(0) gives two (12 bytes, 24 a
// layer), and the eager loop's gate_up_proj[e] and down_proj[e] for an
// expert e > 0 (the whole 3-D parameters: 98,304 bytes in fp32, 49,152 in
// bf16, on each top-k layer; the hash layer's zero tid2eid, as
// initialised, routes every token to expert 0). The CSA layer's indexer
// saves tensors too (saved 2,985,428 against kept 2,894,996 at 2 layers
// in fp32), which die with its forward: no gradient reaches it. The
// parameters' and gradients' bytes in bf16 (the harness's param_bytes
// and grad_bytes: 173,820 and 173,820; 341,412 and 328,036; 487,436 and
// 474,060) are memsh's too: the fp32-kept modules, and no gradient for
// the indexer's weights.
func TestDeepSeekV4SavesAsTransformers(t *testing.T) {
	const scaleViews = 24 // a layer
	expertViews := map[string]int64{"fp32": 4 * (64*64 + 64*32) * 4, "bf16": 4 * (64*64 + 64*32) * 2}
	for _, tc := range []struct {
		precision, experts string
		kept               [3]int64
	}{
		{"fp32", "", [3]int64{1_525_036, 2_894_996, 4_233_692}},
		{"bf16", "", [3]int64{1_425_580, 2_666_900, 3_879_260}},
		{"fp32", "eager", [3]int64{1_556_764, 3_056_756, 4_525_484}},
		{"bf16", "eager", [3]int64{1_440_924, 2_746_740, 4_023_596}},
	} {
		for i, kept := range tc.kept {
			layers := int64(i + 1)
			want := kept - layers*scaleViews
			if tc.experts == "eager" {
				want -= (layers - 1) * expertViews[tc.precision] // the top-k layers
			}
			r := dsv4Eval(t, layers, tc.precision, tc.experts)
			if got := r.SavedActivations; got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d less the parameter views, %d (%+d)", tc.precision, tc.experts, layers, got, kept, want, got-want)
			}
		}
	}
	for i, want := range [][2]int64{{173_820, 173_820}, {341_412, 328_036}, {487_436, 474_060}} {
		r := dsv4Eval(t, int64(i+1), "bf16", "")
		if got := [2]int64{r.States.Params, r.States.Grads}; got != want {
			t.Errorf("bf16, %d layers: parameters and gradients %v bytes, transformers %v", i+1, got, want)
		}
	}
}

// dsv4Eval evaluates deepseek-v4-tiny.json cut to layers, 2 x 32 tokens on
// the CPU, experts as hf_config's experts= says.
func dsv4Eval(t *testing.T, layers int64, precision, experts string) *replay.Report {
	t.Helper()
	return evalPlan(t, hfOraclePlan(t, ropeConfig(t, "deepseek-v4-tiny.json", layers, nil), hf.Options{Attn: "eager", Experts: experts}, precision))
}

// The transient memory of DeepSeek-V4's lightning indexer: the most bytes
// of storages made inside one call alive at once, in a training forward
// of deepseek-v4-tiny.json cut to 2 layers (layer 1 compressed sparse:
// the indexer's 4 heads of 16 score S / 4 entries), against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, use_cache=False):
//
//	python tools/oracle/v4_indexer.py sim/testdata/hf/deepseek-v4-tiny.json 2 {1,2} 512 {float32,bfloat16}
//
// The indexer runs with autograd on (its top-k indices take no gradient):
// what its ops save lives until it returns, beside its locals (core's
// DeadGraph), so its peak holds the relu'd, scaled and weighted
// [B, S, heads, entries] fp32 scores at once, and with B > 1 matmul's
// copies of q and of the keys expanded to every query. 512 tokens keep
// every small tensor a multiple of 512 bytes, the caching allocator's
// rounding, which memsh's figure includes and the harness's does not.
func TestDeepSeekV4IndexerPeak(t *testing.T) {
	for _, tc := range []struct {
		batch     int64
		precision string
		peak      int64
	}{
		{1, "fp32", 4_027_904},
		{2, "fp32", 16_656_384},
		{1, "bf16", 4_001_280},
		{2, "bf16", 16_349_184},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, "deepseek-v4-tiny.json", 2, nil), hf.Options{Attn: "eager"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), tc.batch, 512
		if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
			t.Fatal(err)
		}
		rep, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := forwardPeakIn(rep, "layers.1.self_attn.compressor.indexer"); got != tc.peak {
			t.Errorf("batch %d %s: the indexer's transient peak is %d bytes, transformers' %d", tc.batch, tc.precision, got, tc.peak)
		}
	}
}
