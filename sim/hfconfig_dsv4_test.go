package sim

import "testing"

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

// What DeepSeek-V4's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, eager: the model has no
// other attention), deepseek-v4-tiny.json cut to 1, 2 and 3 layers (layer
// 0 sliding with hash routing, 1 compressed sparse with top-k routing, 2
// heavily compressed), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// (kept; keepfp32 builds bf16 as from_pretrained loads it, the
// hyper-connections, sinks, position biases, norms and correction bias in
// fp32). The harness counts 12 bytes a hyper-connection memsh does not:
// scale.unbind(0)'s second and third elements, views of the fp32 scale
// parameter at an offset, which its parameter filter (data_ptr) misses;
// the parameter's own storage, not an activation: 24 bytes a layer. The
// CSA layer's indexer saves tensors too (saved 2,985,428 against kept
// 2,894,996 at 2 layers in fp32), which die with its forward: no gradient
// reaches it.
func TestDeepSeekV4SavesAsTransformers(t *testing.T) {
	const scaleViews = 24 // a layer
	for _, tc := range []struct {
		precision string
		kept      [3]int64
	}{
		{"fp32", [3]int64{1_525_036, 2_894_996, 4_233_692}},
		{"bf16", [3]int64{1_425_580, 2_666_900, 3_879_260}},
	} {
		for i, kept := range tc.kept {
			want := kept - int64(i+1)*scaleViews
			if got := graniteSaved(t, "deepseek-v4-tiny.json", i+1, tc.precision, "eager", false); got != want {
				t.Errorf("%s, %d layers: memsh keeps %d, transformers %d less the scale views, %d (%+d)", tc.precision, i+1, got, kept, want, got-want)
			}
		}
	}
}
