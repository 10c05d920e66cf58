package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/nn"
)

// Hunyuan's MoE model (model_type hunyuan_v1_moe: tencent/Hunyuan-A13B-
// Pretrain and -Instruct; models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py
// at 5.25.0) is Hunyuan's dense decoder (buildDecoder: attention_bias on
// q, k, v and o, a required head_dim, query_layernorm and key_layernorm
// over each head after the rotary embedding) whose every mlp is
// HunYuanMoEV1Moe:
//
//   - shared_mlp, a SwiGLU MLP of intermediate_size, on every token;
//   - gate (HunYuanMoEV1Gate): wg, an nn.Linear(hidden_size, num_experts)
//     built with dtype=torch.float32, so it stays fp32 whatever dtype the
//     model is loaded in (from_pretrained bf16, fp16 or "auto": checked
//     on transformers 5.25.0, the class lists nothing in
//     _keep_in_fp32_modules; the 4.56 to 4.57 gate is the same); it runs
//     over hidden_states.float(), then an fp32 softmax, the top moe_topk
//     and their renormalisation;
//   - experts (HunYuanMoEV1Experts): num_experts experts of
//     intermediate_size, 3-D gate_up_proj and down_proj run by
//     experts_implementation from 5.0; 4.x loops over an nn.ModuleList of
//     HunYuanMoEV1MLP (experts.<e>.gate_proj, up_proj, down_proj).
//
// transformers 5.x weights the experts' outputs in fp32
// (routing_weights.to(router_logits.dtype), the fp32 gate's:
// hfExperts.weightsFP32); 4.x casts the weights to the hidden states'
// dtype first. moe_intermediate_size, num_shared_expert and
// use_mixed_mlp_moe, which the published config.json carries, are read by
// neither release: every layer has one shared MLP and experts of
// intermediate_size. num_experts_per_tok and num_local_experts are
// HunYuanMoEV1Config's aliases of moe_topk and num_experts
// (attribute_map).
func (c *hfConfig) hunyuanMoE(hidden, layers int64, act string) (*nn.MoE, float64) {
	inter := c.size("intermediate_size")
	expertsKey := c.firstKey("num_experts", "num_local_experts")
	experts := c.sizeOr(expertsKey, 1) // HunYuanMoEV1Config.num_experts
	topKKey := c.firstKey("moe_topk", "num_experts_per_tok")
	topK := c.layerUniform(topKKey, layers, 1) // HunYuanMoEV1Config.moe_topk
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act,
		NormTopK: true, RouterName: "gate.wg", RouterFP32: true, KeepRouterFP32: true,
		SharedExperts: 1, SharedName: "shared_mlp"}
	c.checkLayer(m, moeKeys(expertsKey, topKKey))
	return m, float64(experts+1) * 3 * float64(hidden) * float64(inter)
}

// layerUniform reads a positive integer that may be given per layer, as a
// list indexed by the layer (HunYuanMoEV1Gate's config.moe_topk[layer_idx];
// Hunyuan-A13B's config.json lists 8 for each of its 32 layers). memsh
// builds one block for every layer, so the list's first layers entries
// must agree.
func (c *hfConfig) layerUniform(key string, layers, def int64) int64 {
	list, ok := c.raw[key].([]any)
	if !ok {
		return c.sizeOr(key, def)
	}
	if int64(len(list)) < layers {
		c.fail(key, "must be an integer or list one for each of the %d layers (got %d entries)", layers, len(list))
		return 0
	}
	var first int64
	for i, v := range list[:layers] {
		n, ok := v.(json.Number)
		x, err := n.Int64()
		if !ok || err != nil || x < 1 {
			c.fail(key, "must list positive integers (got %s at %d)", describeJSON(v), i)
			return 0
		}
		if i == 0 {
			first = x
		} else if x != first {
			c.fail(key, "must be the same for every layer in memsh (got %d at 0, %d at %d); give one integer", first, x, i)
			return 0
		}
	}
	return first
}
