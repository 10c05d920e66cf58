package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLongcatFlash builds transformers' LongcatFlashForCausalLM
// (model_type longcat_flash: meituan-longcat/LongCat-Flash-Chat and
// -Thinking; modular_longcat_flash.py at 5.25.0). Each of num_layers
// layers (nn.LongcatLayer) runs two MLA attentions (LongcatFlashMLA:
// DeepSeek-V3.2's attention without its indexer, q_lora always, the LoRA
// scaling applied whatever mla_scale_q_lora and mla_scale_kv_lora say:
// nn.MLA.LoraScale) and two dense MLPs of ffn_hidden_size (mlps.0, mlps.1),
// and one shortcut MoE (mlp) over the first MLP's input: n_routed_experts
// experts of expert_ffn_hidden_size, moe_topk a token, and
// zero_expert_num identity experts (zero_expert_type "identity", the only
// kind transformers runs) that the softmax router also scores
// (nn.MoE.ZeroExperts). The checkpoint's MTP layers (model.mtp) are not
// built (_keys_to_ignore_on_load_unexpected).
func buildLongcatFlash(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.sizeOr("num_layers", 28)
	heads := c.size("num_attention_heads")
	c.kvHeads("num_key_value_heads", heads) // MLA has no kv heads; LongcatFlashConfig defaults them to the heads
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	inter := c.sizeOr("ffn_hidden_size", 12288)
	experts := c.sizeOr("n_routed_experts", 512)
	zero := c.intOr("zero_expert_num", 256)
	if v, ok := c.raw["zero_expert_num"]; ok && v == nil {
		zero = 0 // LongcatFlashMoE: config.zero_expert_num or 0
	}
	if v, ok := c.raw["q_lora_rank"]; ok && v == nil {
		c.fail("q_lora_rank", "must be a positive integer (got null): LongcatFlashMLA always projects q through its q_lora_rank latent")
	}
	topK := c.sizeOr("moe_topk", 12)
	moeInter := c.sizeOr("expert_ffn_hidden_size", 2048)
	if t := c.str("zero_expert_type", "identity"); t != "identity" {
		c.fail("zero_expert_type", "must be \"identity\" (got %q): transformers' LongcatFlashMoE runs identity zero experts only", t)
	}
	c.flag("mla_scale_q_lora", true)
	c.flag("mla_scale_kv_lora", true)
	c.number("routed_scaling_factor", 6)
	c.object("rope_scaling")
	c.prob("attention_dropout", 0)
	at := &nn.MLA{Dim: hidden, Heads: heads, QLoraRank: c.sizeOr("q_lora_rank", 1536), KVLora: c.sizeOr("kv_lora_rank", 512),
		Nope: c.sizeOr("qk_nope_head_dim", 128), RopeDim: c.sizeOr("qk_rope_head_dim", 64), VDim: c.sizeOr("v_head_dim", 128),
		Bias: c.flag("attention_bias", false), Impl: attn, Causal: true, RopeTables: "rotary_emb", LoraScale: true}
	if c.err != nil {
		return nil
	}
	c.checkLayer(at, mlaKeys)
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts, ZeroExperts: zero, TopK: topK, Act: act,
		ClassifierRouter: true}
	c.checkLayer(moe, moeKeys("n_routed_experts", "moe_topk"))
	attnParams := 2 * float64(hidden) * float64(heads*(at.Nope+at.RopeDim+at.VDim))
	c.checkTotal(float64(layers)*(2*attnParams+6*float64(hidden)*float64(inter)+float64(experts)*3*float64(hidden)*float64(moeInter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	var attns, mlps [2]core.Layer
	for i := range 2 {
		a := *at
		a.Name = "self_attn." + core.Itoa(int64(i))
		attns[i] = &a
		mlps[i] = &nn.MLP{Name: "mlps." + core.Itoa(int64(i)), Dim: hidden, Hidden: inter, Act: act}
	}
	block := &nn.LongcatLayer{Dim: hidden, Attn: attns, MLPs: mlps, MoE: moe}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = block
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "norm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}
