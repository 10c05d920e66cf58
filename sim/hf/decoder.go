package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// Llama and its relatives in transformers: pre-norm decoders with RMSNorm,
// rotary embeddings, a gated MLP (or a mixture of experts) and no
// position table. One builder covers llama (1, 2, 3.x), mistral, mixtral,
// qwen2, qwen2_moe, qwen3, gemma, gemma2 and phi3; their differences are
// the switches of decoderFamily (from each family's modeling_*.py).
type decoderFamily struct {
	tie        bool  // tie_word_embeddings default
	qkvBias    bool  // q, k, v biased, o not (Qwen2, Qwen2-MoE)
	biasFlags  bool  // attention_bias (q, k, v, o) and mlp_bias (Llama)
	attnBias   bool  // attention_bias (q, k, v, o), no mlp_bias (Qwen3, Gemma)
	headDimDef int64 // default head_dim (Gemma 256, Qwen3 128); 0 = hidden/heads
	moe        string
	qkNorm     bool // per-head RMS norm of q and k (Qwen3)
	gemma      int  // 1: Gemma (embeddings scaled by sqrt(hidden)); 2: + Gemma2's sandwich norms
	fused      bool // one qkv_proj and one gate_up_proj (Phi-3)
	actKey     string
}

func decoderFamilyOf(mt string) decoderFamily {
	switch mt {
	case "llama":
		return decoderFamily{biasFlags: true, actKey: "hidden_act"}
	case "mistral":
		return decoderFamily{actKey: "hidden_act"}
	case "mixtral":
		return decoderFamily{moe: "mixtral", actKey: "hidden_act"}
	case "qwen2":
		return decoderFamily{qkvBias: true, actKey: "hidden_act"}
	case "qwen2_moe":
		return decoderFamily{qkvBias: true, moe: "qwen2_moe", actKey: "hidden_act"}
	case "qwen3":
		return decoderFamily{attnBias: true, headDimDef: 128, qkNorm: true, actKey: "hidden_act"}
	case "gemma":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 1, actKey: "hidden_activation"}
	case "gemma2":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 2, actKey: "hidden_activation"}
	case "phi3":
		return decoderFamily{fused: true, actKey: "hidden_act"}
	}
	return decoderFamily{actKey: "hidden_act"}
}

// buildDecoder builds a Llama-style decoder:
//
//	embed_tokens, [Gemma: * sqrt(hidden)],
//	layers: x + self_attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x)),
//	norm, lm_head
//
// The eager softmax runs in fp32 (eager_attention_forward:
// softmax(..., dtype=torch.float32)).
//
// Gemma 2 soft-caps the logits (final_logit_softcapping, default 30.0)
// and the eager attention scores (attn_logit_softcapping, default 50.0;
// Gemma2Config in configuration_gemma2.py; null turns either off):
// core/softcap.go.
//
// Parameters are exact; two memory details are not modelled yet (neither
// holds parameters): Gemma's RMSNorm, x * (1 + w) computed in fp32, is
// lowered as Llama's; Phi-3's fused gate_up_proj gives one [tokens,
// 2*ffn] storage where the lowering has two [tokens, ffn] ones (the same
// bytes).
func buildDecoder(c *hfConfig, attn string, head hfHead) *core.Model {
	f := decoderFamilyOf(c.modelType)
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	vocab := c.size("vocab_size")
	hd := c.headDim(hidden, heads, f.headDimDef)
	c.object("rope_scaling")
	c.number("rope_theta", 10000)
	tie := c.flag("tie_word_embeddings", f.tie)

	var qkvBias, outBias, mlpBias bool
	switch {
	case f.qkvBias:
		qkvBias = true
	case f.biasFlags:
		qkvBias = c.flag("attention_bias", false)
		outBias, mlpBias = qkvBias, c.flag("mlp_bias", false)
	case f.attnBias:
		qkvBias = c.flag("attention_bias", false)
		outBias = qkvBias
	}
	actKey, actDef := f.actKey, "silu"
	if f.gemma > 0 {
		actDef = "gelu_pytorch_tanh"
		if !c.has(actKey) {
			actKey = "hidden_act" // GemmaMLP falls back to it (and warns)
		}
	}
	act := c.mlpAct(actKey, actDef, true)

	pa := c.prob("attention_dropout", 0)
	var po, pe float64
	if c.modelType == "phi3" {
		po = c.prob("resid_pdrop", 0)
		pe = c.prob("embd_pdrop", 0)
	}
	attnDrop, afterAttn := c.attnDropout("attention_dropout", pa, po)

	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: qkvBias, OutBias: outBias, Impl: attn, Causal: true, Dropout: attnDrop,
		Rope: true, FusedQKV: f.fused, SoftmaxFP32: true, QKNorm: f.qkNorm}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	var logitCap float64
	if f.gemma == 2 {
		at.Softcap = c.softcap("attn_logit_softcapping", 50)
		logitCap = c.softcap("final_logit_softcapping", 30)
	}

	// The feed-forward block of each layer: dense, or sparse (MoE).
	var inter int64
	dense := func() core.Layer {
		if inter == 0 {
			inter = c.size("intermediate_size")
		}
		return &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias, Dropout: po}
	}
	sparse := make([]bool, layers)
	var moe core.Layer
	estimateFF := float64(0)
	switch f.moe {
	case "mixtral":
		// MixtralSparseMoeBlock: an nn.Linear router named gate, experts
		// w1 (gate), w3 (up), w2 (down), top-k weights renormalised.
		inter = c.size("intermediate_size")
		experts := c.size("num_local_experts")
		moe = &nn.MoE{Name: "block_sparse_moe", Dim: hidden, Hidden: inter, Experts: experts,
			TopK: c.size("num_experts_per_tok"), Act: act, NormTopK: true, WNames: true}
		for i := range sparse {
			sparse[i] = true
		}
		estimateFF = float64(experts) * 3 * float64(hidden) * float64(inter)
	case "qwen2_moe":
		// Qwen2MoeSparseMoeBlock: gate (nn.Linear), experts, shared_expert
		// times sigmoid(shared_expert_gate(x)).
		experts := c.sizeOr("num_experts", 0)
		step := c.sizeOr("decoder_sparse_step", 1)
		only := c.intList("mlp_only_layers", layers)
		for i := range sparse {
			sparse[i] = experts > 0 && !only[int64(i)] && (int64(i)+1)%step == 0
		}
		if experts > 0 {
			moeInter := c.size("moe_intermediate_size")
			shared := c.size("shared_expert_intermediate_size")
			moe = &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts,
				TopK: c.size("num_experts_per_tok"), Act: act, NormTopK: c.flag("norm_topk_prob", false),
				SharedExperts: 1, SharedHidden: shared, SharedGate: true}
			estimateFF = float64(experts)*3*float64(hidden)*float64(moeInter) + 3*float64(hidden)*float64(shared)
		}
	}
	if c.err != nil {
		return nil
	}
	var denseBlock, sparseBlock core.Layer
	block := func(ff core.Layer) core.Layer {
		attnPart := []core.Layer{norm("input_layernorm"), at}
		attnPart = append(attnPart, afterAttn...)
		mlpNorm := "post_attention_layernorm"
		if f.gemma == 2 {
			attnPart = append(attnPart, norm("post_attention_layernorm"))
			mlpNorm = "pre_feedforward_layernorm"
		}
		mlpPart := []core.Layer{norm(mlpNorm), ff}
		if f.gemma == 2 {
			mlpPart = append(mlpPart, norm("post_feedforward_layernorm"))
		}
		return seq(res(attnPart...), res(mlpPart...))
	}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		if sparse[i] {
			if sparseBlock == nil {
				sparseBlock = block(moe)
			}
			blocks[i] = sparseBlock
			continue
		}
		if denseBlock == nil {
			denseBlock = block(dense())
			estimateFF = math.Max(estimateFF, 3*float64(hidden)*float64(inter))
		}
		blocks[i] = denseBlock
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+estimateFF) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}

	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if f.gemma > 0 {
		ls = append(ls, &nn.Scale{Name: "embed_scale", Factor: math.Sqrt(float64(hidden))})
	}
	if pe > 0 {
		ls = append(ls, &nn.Dropout{Name: "embed_dropout", P: pe})
	}
	ls = append(ls, stackBlocks("layers", blocks), norm("norm"))
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitSoftcap = logitCap
	}
	return m
}
