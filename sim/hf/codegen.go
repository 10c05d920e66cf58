package hf

import "github.com/memsh/memsh/sim/core"

// codegenShards is CodeGenAttention's mp_num: qkv_proj's output is laid
// out as the 4 model-parallel shards CodeGen was trained with
// (models/codegen/modeling_codegen.py at transformers 5.25.0).
const codegenShards = 4

// buildCodeGen follows transformers' CodeGenForCausalLM (model_type
// codegen: Salesforce's CodeGen 350M to 16B, mono, multi and nl;
// models/codegen at 5.25.0): GPT-J's model (buildGPTJ: transformer.wte,
// drop, h of ln_1 then attn and mlp side by side, ln_f, a biased
// lm_head; CodeGenConfig's keys, attribute_map and defaults are
// GPTJConfig's, n_ctx unused) with CodeGenAttention: one unbiased
// qkv_proj (n_embd x 3 n_embd) whose output, viewed as 4 shards, splits
// into q, v and k, each copied to heads by reshape unless n_head is 4
// (nn.Attention.QKVShards), and rotary tables that stay fp32 (the
// embed_positions buffer from_pretrained leaves fp32), q and k cast to
// v's dtype after it (nn.Attention.RopeToV; attention_codegen.go).
// n_embd must be a multiple of 4 (the view); rotary_dim null is refused
// as GPT-J's.
func buildCodeGen(c *hfConfig, attn string, head hfHead) *core.Model {
	return buildGPTJLike(c, attn, head, true)
}
