package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGPTBigCode follows transformers' GPTBigCodeForCausalLM (model_type
// gpt_bigcode: bigcode/starcoder, starcoderbase, santacoder's
// gpt_bigcode-santacoder; models/gpt_bigcode/modeling_gpt_bigcode.py at
// 5.25.0): GPT-2's layout (transformer.wte + wpe, drop, h: x +
// attn(ln_1(x)); x + mlp(ln_2(x)), ln_f, lm_head tied to wte) with
// nn.Linear projections, biased throughout. The attention's c_attn is one
// fused projection to hidden_size + 2 x kv_dim outputs: with multi_query
// (the default) one k and one v head of head_dim (hidden_size // n_head)
// split off its output, which eager_attention_forward repeats with
// repeat_kv (SDPA gets them as they are with enable_gqa, as any grouped
// attention); without, n_head heads laid out [head, 3 x head_dim]. All
// three stay views of c_attn's output. The eager softmax runs in fp32
// (eager_attention_forward; attention_softmax_in_fp32 is read by nothing
// at 5.25.0). attn_pdrop drops the probabilities, resid_pdrop c_proj's
// outputs (attention and MLP), embd_pdrop the embeddings' sum.
// add_cross_attention is refused.
func buildGPTBigCode(c *hfConfig, attn string, head hfHead) *core.Model {
	s, pa := c.gpt2Config("gelu_pytorch_tanh", func() int64 { return c.firstSize("n_layer", "num_hidden_layers") }) // GPTBigCodeConfig.attribute_map
	hidden, layers, heads, vocab, positions, inner := s.hidden, s.layers, c.size("n_head"), s.vocab, s.positions, s.inner
	mq := c.flag("multi_query", true)
	c.flag("scale_attn_weights", true) // the scale only: nothing kept changes
	if c.flag("add_cross_attention", false) {
		c.fail("add_cross_attention", "is not modelled (GPTBigCodeBlock's cross-attention to encoder_hidden_states); hf_config builds the decoder alone: set it false")
	}
	if c.err == nil && hidden%heads != 0 {
		c.fail("n_head", "must divide n_embd (%d): GPTBigCodeAttention makes head_dim n_embd // n_head (got %d)", hidden, heads)
	}
	hd := hidden / max(heads, 1)
	kv := heads
	if mq {
		kv = 1
	}
	drop, after := c.attnDropout("attn_pdrop", pa, s.residDrop, "attn.resid_dropout")
	c.checkTotal(float64(layers)*(2*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(kv*hd)+2*float64(hidden)*float64(inner)) + float64(vocab+positions)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: true, OutBias: true,
		Impl: attn, Causal: true, Dropout: drop, FusedQKV: true, RepeatKV: mq, QKVName: "c_attn", OutName: "c_proj",
		SoftmaxFP32: true, EagerMask: true}
	return c.gpt2Stack(head, at, after, s)
}
