package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildHrmText is transformers' HrmTextForCausalLM (Sapient's HRM-Text,
// sapientinc/HRM-Text-1B; models/hrm_text/modular_hrm_text.py and
// configuration_hrm_text.py at 5.25.0):
//
//	embed_tokens, times embedding_scale (default 1 / initializer_range, a Python float),
//	L_module and H_module: num_layers_per_stack Llama layers each and a final_norm,
//	run H_cycles x (L_cycles L calls, one H call) (nn.HrmCycles),
//	lm_head (untied by default)
//
// The layers are Llama's with Llama 4's weightless RMSNorm in fp32
// (HrmTextRMSNorm: input_layernorm, post_attention_layernorm and each
// stack's final_norm; nn.WeightlessRMSNorm) and an attention of
// num_attention_heads heads for q, k and v alike (no grouped keys),
// head_dim 128 by default, whose output is multiplied by the sigmoid of
// a gate_proj of its own (nn.Attention.GateProj), all four projections
// and o_proj biased by attention_bias; the MLP is Llama's (mlp_bias).
//
// num_hidden_layers is each stack's layer count as the hub's files write
// it; HrmTextConfig.__post_init__ keeps it in num_layers_per_stack and
// rewrites num_hidden_layers to num_layers_per_stack x H_cycles x
// (L_cycles + 1), the cache's slots, so a file saved by transformers
// carries both and num_layers_per_stack wins.
//
// L_bp_cycles (default [2]) is left-padded with 1s to H_cycles: cycle h
// runs its last L_bp_cycles[h] L calls with grad and the others under
// torch.no_grad() (one with grad past the list's end). prefix_lm (default
// true) lets token_type_ids make the instruction tokens attend both ways:
// memsh models batches without them (the causal mask), and refuses flash
// attention with prefix_lm, as transformers does.
func buildHrmText(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	if c.has("num_layers_per_stack") {
		layers = c.size("num_layers_per_stack")
	}
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	hd := c.headDim("hidden_size", "num_attention_heads", 0) // HrmTextConfig's 128: configClasses
	if heads > 0 && hidden%heads != 0 && c.err == nil {
		c.fail("hidden_size", "(%d) is not a multiple of num_attention_heads (%d): HrmTextConfig refuses it (validate_architecture), whatever head_dim says", hidden, heads)
	}
	hCycles, lCycles := c.sizeOr("H_cycles", 2), c.sizeOr("L_cycles", 3)
	if c.err == nil && float64(layers)*float64(hCycles)*float64(lCycles+1) > core.MaxLayers {
		// HrmTextConfig's num_hidden_layers: a stack's layers run
		// H_cycles x (L_cycles + 1) times
		c.fail("H_cycles", "x (L_cycles + 1) x %d layers a stack is more layer calls than memsh simulates (got %d x %d; at most %d)", layers, hCycles, lCycles+1, core.MaxLayers)
	}
	if c.err != nil {
		return nil
	}
	grad := c.hrmGradCycles(hCycles)
	c.hrmEmbeddingScale()
	if c.flag("prefix_lm", true) && attn == "flash" && c.err == nil {
		c.fail("prefix_lm", "is true: transformers refuses flash attention for HRM-Text then (FlashAttention cannot represent the PrefixLM mask)")
	}
	c.object("rope_scaling")
	c.number("rope_theta", 10000)
	tie := c.flag("tie_word_embeddings", false)
	bias, mlpBias := c.flag("attention_bias", false), c.flag("mlp_bias", false)
	act := c.mlpAct("hidden_act", "silu", true)
	drop := c.prob("attention_dropout", 0)
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: heads, HeadDim: hd,
		QKVBias: bias, OutBias: bias, GateProj: true, GateBias: bias, Impl: attn, Causal: true, Dropout: drop,
		ProbsDropoutOnly: true, Rope: true, SoftmaxFP32: true, EagerMask: true, RopeTables: "rotary_emb"}
	c.checkLayer(at, map[nn.Field]string{nn.FieldHeads: "num_attention_heads"})
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias}
	c.checkLayer(mlp, map[nn.Field]string{nn.FieldHidden: "intermediate_size"})
	c.checkTotal(2*float64(layers)*(5*float64(hidden)*float64(heads*hd)+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.WeightlessRMSNorm{Name: name, Dim: hidden} }
	block := seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), mlp))
	stack := func(name string) core.Layer {
		return &core.Sequential{Name: name, Layers: []core.Layer{
			&core.Repeat{Name: "layers", Layer: block, N: layers}, norm("final_norm")}}
	}
	cycles := &nn.HrmCycles{Dim: hidden, L: stack("L_module"), H: stack("H_module"), HCycles: hCycles, LCycles: lCycles, Grad: grad}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&nn.Scale{Name: "embedding_scale", Factor: c.hrmEmbeddingScale(), Rebinds: true}, cycles}
	return c.finish(head, ls, vocab, tie)
}

// hrmGradCycles is HrmTextModel's L_bp_cycles_padded read per H cycle:
// L_bp_cycles (default [2]) left-padded with 1s to hCycles, each cycle's
// count of L calls with grad (1 past the list's end; 0 or less: none).
func (c *hfConfig) hrmGradCycles(hCycles int64) []int64 {
	bp := []int64{2}
	if c.has("L_bp_cycles") {
		list, ok := c.raw["L_bp_cycles"].([]any)
		if !ok {
			c.fail("L_bp_cycles", "must be a list of integers (got %s)", describeJSON(c.raw["L_bp_cycles"]))
			return nil
		}
		bp = bp[:0]
		for _, v := range list {
			n, ok := v.(json.Number)
			i, err := n.Int64()
			if !ok || err != nil {
				c.fail("L_bp_cycles", "must be a list of integers (got %s)", describeJSON(v))
				return nil
			}
			bp = append(bp, i)
		}
	}
	padded := make([]int64, max(0, hCycles-int64(len(bp))), hCycles+int64(len(bp)))
	for i := range padded {
		padded[i] = 1
	}
	padded = append(padded, bp...)
	grad := make([]int64, hCycles)
	for h := range grad {
		grad[h] = 1
		if h < len(padded) {
			grad[h] = padded[h]
		}
	}
	return grad
}

// hrmEmbeddingScale is embedding_scale, or 1 / initializer_range where
// it is null or left out (HrmTextConfig.__post_init__); memsh models a
// positive one.
func (c *hfConfig) hrmEmbeddingScale() float64 {
	if c.has("embedding_scale") {
		s := c.number("embedding_scale", 1)
		if !(s > 0) && c.err == nil {
			c.fail("embedding_scale", "must be a positive number (got %g): memsh models a positive scale of the embeddings", s)
		}
		return s
	}
	r := c.number("initializer_range", 0.02)
	if !(r > 0 && r <= 1) && c.err == nil {
		c.fail("initializer_range", "must be in (0, 1] (got %g): HrmTextConfig's embedding_scale, left null, is 1 / initializer_range", r)
	}
	return 1 / r
}
