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
