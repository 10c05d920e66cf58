package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// GPT-2, GPT-NeoX, OPT, BLOOM and Falcon: decoders with LayerNorm (weight
// and bias), plain (non-gated) MLPs with biases, and fused or separate
// attention projections. Module names follow each family's modeling_*.py.

// buildGPT2 follows transformers/models/gpt2/modeling_gpt2.py: wte + wpe
// (learned positions, [1, seq] ids), drop, h: x + attn(ln_1(x));
// x + mlp(ln_2(x)) with Conv1D projections (weight and bias everywhere),
// ln_f, lm_head tied to wte. The attention's c_attn is one fused qkv
// projection, c_proj its output; the MLP's are c_fc and c_proj. The eager softmax runs in the activations' dtype unless
// reorder_and_upcast_attn.
func buildGPT2(c *hfConfig, attn string, head hfHead) *core.Model {
	s, pa := c.gpt2Config("gelu_new", func() int64 { return c.size("n_layer") })
	hidden, layers, heads, vocab, positions, inner := s.hidden, s.layers, c.size("n_head"), s.vocab, s.positions, s.inner
	upcast := c.flag("reorder_and_upcast_attn", false)
	hd := c.headDim("n_embd", "n_head", 0)
	drop, after := c.attnDropout("attn_pdrop", pa, s.residDrop, "attn.resid_dropout")
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inner)) + float64(vocab+positions)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attn", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: true, OutBias: true,
		Impl: attn, Causal: true, Dropout: drop, FusedQKV: true, QKVName: "c_attn", OutName: "c_proj", SoftmaxFP32: upcast, EagerMask: true}
	return c.gpt2Stack(head, at, after, s)
}

// gpt2Config reads GPT-2's keys (GPT-2's and GPTBigCode's configs), the
// layer count by layers (after n_embd, as transformers' errors come),
// the activation defaulting to act; pa is attn_pdrop.
func (c *hfConfig) gpt2Config(act string, layers func() int64) (s gpt2Sizes, pa float64) {
	s.hidden = c.size("n_embd")
	s.layers = layers()
	s.vocab, s.positions = c.size("vocab_size"), c.size("n_positions")
	s.inner = c.sizeOr("n_inner", 4*s.hidden)
	s.act = c.mlpAct("activation_function", act, false)
	pa = c.prob("attn_pdrop", 0.1)
	s.residDrop, s.embedDrop = c.prob("resid_pdrop", 0.1), c.prob("embd_pdrop", 0.1)
	s.tie = c.flag("tie_word_embeddings", true)
	return s, pa
}

// gpt2Sizes are what gpt2Stack builds around the attention.
type gpt2Sizes struct {
	hidden, inner, vocab, positions, layers int64
	act                                     string
	residDrop, embedDrop                    float64
	tie                                     bool
}

// gpt2Stack is GPT-2's layout around the attention at (GPT-2's and
// GPTBigCode's): wte + wpe (learned positions), drop, h: x + after(at(ln_1(x)));
// x + mlp(ln_2(x)) with c_fc and c_proj, ln_f.
func (c *hfConfig) gpt2Stack(head hfHead, at *nn.Attention, after []core.Layer, s gpt2Sizes) *core.Model {
	attnPart := append([]core.Layer{&nn.Norm{Name: "ln_1", Dim: s.hidden, Bias: true}, at}, after...)
	block := seq(
		res(attnPart...),
		res(&nn.Norm{Name: "ln_2", Dim: s.hidden, Bias: true},
			&nn.MLP{Name: "mlp", Dim: s.hidden, Hidden: s.inner, Act: s.act, Bias: true, Dropout: s.residDrop, InName: "c_fc", OutName: "c_proj"}),
	)
	ls := []core.Layer{
		&nn.Embedding{Name: "wte", Rows: s.vocab, Dim: s.hidden},
		&nn.AddEmbedding{Name: "wpe", Rows: s.positions, Dim: s.hidden, MaxSeq: s.positions},
	}
	if s.embedDrop > 0 {
		ls = append(ls, &nn.Dropout{Name: "drop", P: s.embedDrop})
	}
	ls = append(ls, &core.Repeat{Name: "h", Layer: block, N: s.layers}, &nn.Norm{Name: "ln_f", Dim: s.hidden, Bias: true})
	return c.finish(head, ls, s.vocab, s.tie)
}

// buildGPTNeoX follows transformers/models/gpt_neox/modeling_gpt_neox.py
// (Pythia): embed_in, emb_dropout, layers with a fused query_key_value and
// dense (biased when attention_bias, the default), rotary embeddings on
// rotary_pct of each head, and by default the parallel residual
// x + attn(input_layernorm(x)) + mlp(post_attention_layernorm(x));
// final_layer_norm, embed_out (untied by default). Eager softmax in fp32.
func buildGPTNeoX(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	act := c.mlpAct("hidden_act", "gelu", false)
	bias := c.flag("attention_bias", true)
	parallel := c.flag("use_parallel_residual", true)
	rotary := c.number("rotary_pct", 0.25)
	pa := c.prob("attention_dropout", 0)
	po := c.prob("hidden_dropout", 0)
	tie := c.flag("tie_word_embeddings", false)
	c.object("rope_scaling")
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	drop, after := c.attnDropout("attention_dropout", pa, po, "dropout")
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attention", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Dropout: drop, Rope: rotary > 0, FusedQKV: true, QKVName: "query_key_value", OutName: "dense",
		SoftmaxFP32: true, EagerMask: true}
	if rotary > 0 { // GPTNeoXModel's rotary_emb: rotary_pct of each head, then a cat
		at.RopeTables, at.RopeTablesDim, at.RopeCat = "rotary_emb", ropeWidth(hd, rotary), true
	}
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: true, Dropout: po, InName: "dense_h_to_4h", OutName: "dense_4h_to_h"}
	attnBranch := seq(append([]core.Layer{&nn.Norm{Name: "input_layernorm", Dim: hidden, Bias: true}, at}, after...)...)
	mlpBranch := seq(&nn.Norm{Name: "post_attention_layernorm", Dim: hidden, Bias: true}, mlp)
	var block core.Layer
	if parallel {
		block = &core.Residual{Layer: &nn.Parallel{Branches: []core.Layer{attnBranch, mlpBranch}}}
	} else {
		block = seq(&core.Residual{Layer: attnBranch}, &core.Residual{Layer: mlpBranch})
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_in", Rows: vocab, Dim: hidden}}
	if po > 0 {
		ls = append(ls, &nn.Dropout{Name: "emb_dropout", P: po})
	}
	ls = append(ls, &core.Repeat{Name: "layers", Layer: block, N: layers},
		&nn.Norm{Name: "final_layer_norm", Dim: hidden, Bias: true})
	return c.finish(head, ls, vocab, tie)
}

// buildOPT follows transformers/models/opt/modeling_opt.py: embed_tokens
// (word_embed_proj_dim wide), project_in when that differs from
// hidden_size, learned positions with an offset of 2 rows and per-sample
// ids (cumsum of the attention mask), layers with q, k, v, out_proj and
// fc1, fc2 (biased when enable_bias), pre- or post-norm
// (do_layer_norm_before), final_layer_norm (pre-norm only), project_out,
// lm_head tied to embed_tokens.
func buildOPT(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	ffn := c.size("ffn_dim")
	positions := c.size("max_position_embeddings")
	proj := c.sizeOr("word_embed_proj_dim", hidden)
	act := c.mlpAct("activation_function", "relu", false)
	bias := c.flag("enable_bias", true)
	before := c.flag("do_layer_norm_before", true)
	removeFinal := c.flag("_remove_final_layer_norm", false)
	affine := c.flag("layer_norm_elementwise_affine", true)
	pa := c.prob("attention_dropout", 0)
	po := c.prob("dropout", 0.1)
	tie := c.flag("tie_word_embeddings", true)
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	if !affine && c.err == nil {
		c.err = &units.Error{Msg: `"layer_norm_elementwise_affine" = false (layer norms without weights) is not supported yet`}
	}
	drop, after := c.attnDropout("attention_dropout", pa, po, "") // OPTDecoderLayer's functional dropout: no module
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(ffn)) + float64(vocab)*float64(proj) + float64(positions+2)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Dropout: drop, OutName: "out_proj"}
	mlp := &nn.MLP{Dim: hidden, Hidden: ffn, Act: act, Bias: bias, Dropout: po, Inline: true} // OPTDecoderLayer's own fc1, fc2
	attnNorm := &nn.Norm{Name: "self_attn_layer_norm", Dim: hidden, Bias: true}
	mlpNorm := &nn.Norm{Name: "final_layer_norm", Dim: hidden, Bias: true}
	attnBody := append([]core.Layer{at}, after...)
	var block core.Layer
	if before {
		block = seq(res(append([]core.Layer{attnNorm}, attnBody...)...), res(mlpNorm, mlp))
	} else {
		block = seq(res(attnBody...), attnNorm, res(mlp), mlpNorm)
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: proj}}
	if proj != hidden {
		ls = append(ls, &nn.Linear{Name: "project_in", In: proj, Out: hidden, Role: "project_in"})
	}
	ls = append(ls,
		&nn.AddEmbedding{Name: "embed_positions", Rows: positions + 2, Dim: hidden, PerSample: true, MaxSeq: positions},
		&core.Repeat{Name: "layers", Layer: block, N: layers})
	if before && !removeFinal {
		ls = append(ls, &nn.Norm{Name: "final_layer_norm", Dim: hidden, Bias: true})
	}
	if proj != hidden {
		ls = append(ls, &nn.Linear{Name: "project_out", In: hidden, Out: proj, Role: "project_out"})
	}
	return c.finish(head, ls, vocab, tie)
}

// buildBLOOM follows transformers/models/bloom/modeling_bloom.py:
// word_embeddings, word_embeddings_layernorm, layers with a fused biased
// query_key_value and dense, ALiBi (no parameters, no rotary), a 4x MLP
// with biases, ln_f, lm_head tied. transformers runs BLOOM's attention
// eagerly only, with the softmax in fp32.
func buildBLOOM(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.firstSize("hidden_size", "n_embed")
	layers := c.firstSize("n_layer", "num_hidden_layers")
	heads := c.firstSize("n_head", "num_attention_heads")
	vocab := c.size("vocab_size")
	pa := c.prob("attention_dropout", 0)
	po := c.prob("hidden_dropout", 0)
	postLN := c.flag("apply_residual_connection_post_layernorm", false)
	tie := c.flag("tie_word_embeddings", true)
	hd := c.headDim(c.firstKey("hidden_size", "n_embed"), c.firstKey("n_head", "num_attention_heads"), 0)
	drop, after := c.attnDropout("attention_dropout", pa, po, "dropout")
	c.checkTotal(float64(layers)*12*float64(hidden)*float64(hidden) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attention", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: true, OutBias: true,
		Impl: attn, Causal: true, Dropout: drop, FusedQKV: true, QKVName: "query_key_value", OutName: "dense", SoftmaxFP32: true}
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: 4 * hidden, Act: "gelu", Bias: true, Dropout: po, InName: "dense_h_to_4h", OutName: "dense_4h_to_h"}
	ln1 := &nn.Norm{Name: "input_layernorm", Dim: hidden, Bias: true}
	ln2 := &nn.Norm{Name: "post_attention_layernorm", Dim: hidden, Bias: true}
	attnBody := append([]core.Layer{at}, after...)
	var block core.Layer
	if postLN {
		// The residual is the layer norm's output.
		block = seq(ln1, res(attnBody...), ln2, res(mlp))
	} else {
		block = seq(res(append([]core.Layer{ln1}, attnBody...)...), res(ln2, mlp))
	}
	ls := []core.Layer{
		&nn.Embedding{Name: "word_embeddings", Rows: vocab, Dim: hidden},
		&nn.Norm{Name: "word_embeddings_layernorm", Dim: hidden, Bias: true},
		&core.Repeat{Name: "h", Layer: block, N: layers},
		&nn.Norm{Name: "ln_f", Dim: hidden, Bias: true},
	}
	return c.finish(head, ls, vocab, tie)
}

// buildFalcon follows transformers/models/falcon/modeling_falcon.py:
// word_embeddings, layers with a fused query_key_value of
// (heads + 2*kv) * head_dim outputs (kv = num_kv_heads with
// new_decoder_architecture, 1 with multi_query, else heads), dense,
// rotary embeddings unless alibi, biases only when bias; the block is
// parallel (attention and MLP on the same input, summed with the residual)
// when parallel_attn or new_decoder_architecture, with one input_layernorm
// or two (ln_attn, ln_mlp: num_ln_in_parallel_attn, 2 by default for the
// new architecture); ln_f; lm_head tied. Eager softmax in the activations'
// dtype. Older configs name the sizes n_layer, n_head, n_head_kv.
func buildFalcon(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.firstSize("num_hidden_layers", "n_layer")
	heads := c.firstSize("num_attention_heads", "n_head")
	vocab := c.size("vocab_size")
	newArch := c.flag("new_decoder_architecture", false)
	multiQuery := c.flag("multi_query", true)
	parallel := c.flag("parallel_attn", true)
	bias := c.flag("bias", false)
	alibi := c.flag("alibi", false)
	ffn := c.sizeOr("ffn_hidden_size", 4*hidden)
	act := c.mlpAct("activation", "gelu", false)
	pa := c.prob("attention_dropout", 0)
	po := c.prob("hidden_dropout", 0)
	tie := c.flag("tie_word_embeddings", true)
	hd := c.headDim("hidden_size", c.firstKey("num_attention_heads", "n_head"), 0)
	if hd*heads != hidden && c.err == nil {
		c.fail("head_dim", "must be hidden_size / num_attention_heads for model_type \"falcon\" (got %d)", hd)
	}
	if alibi && attn == "flash" && c.err == nil { // FalconFlashAttention2.forward; FalconModel.forward from 5.25
		c.fail("alibi", "is true: transformers' Falcon has no flash-attention path with ALiBi (the bias rides on the attention mask, which flash attention does not take; use attn=\"sdpa\" or \"eager\")")
	}
	kv := heads
	switch {
	case newArch:
		if c.has("num_kv_heads") {
			kv = c.kvHeads("num_kv_heads", heads)
		} else {
			kv = c.kvHeads("n_head_kv", heads)
		}
	case multiQuery:
		kv = 1
	}
	nLN := int64(1)
	if parallel || newArch {
		def := int64(1)
		if newArch {
			def = 2
		}
		nLN = c.sizeOr("num_ln_in_parallel_attn", def)
		if nLN != 1 && nLN != 2 {
			c.fail("num_ln_in_parallel_attn", "must be 1 or 2 (got %d)", nLN)
		}
	}
	// Parallel blocks drop only the probabilities (attention_dropout) and
	// the summed output (hidden_dropout); sequential blocks drop the
	// attention output with attention_dropout too (dropout_add).
	par := parallel || newArch
	var drop float64
	var after []core.Layer
	if par {
		drop, after = c.attnDropout("attention_dropout", pa, 0, "dropout")
	} else {
		drop = pa
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(ffn)) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attention", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: bias, OutBias: bias, Impl: attn, Causal: true, Dropout: drop, Rope: !alibi, FusedQKV: true,
		QKVName: "query_key_value", OutName: "dense"}
	if !alibi { // FalconModel's rotary_emb and causal mask, Llama's (with ALiBi the mask carries the bias: not checked)
		at.RopeTables, at.EagerMask = "rotary_emb", true
	}
	attnPart := append([]core.Layer{at}, after...)
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: ffn, Act: act, Bias: bias, InName: "dense_h_to_4h", OutName: "dense_4h_to_h"}
	ln := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: true} }
	var outDrop []core.Layer
	if po > 0 {
		outDrop = []core.Layer{&nn.Dropout{Name: "dropout", P: po}}
	}
	var block core.Layer
	switch {
	case par && nLN == 2:
		p := &nn.Parallel{Branches: []core.Layer{seq(append([]core.Layer{ln("ln_attn")}, attnPart...)...), seq(ln("ln_mlp"), mlp)}}
		block = res(append([]core.Layer{p}, outDrop...)...)
	case par:
		p := &nn.Parallel{Branches: []core.Layer{seq(attnPart...), mlp}}
		block = res(append([]core.Layer{ln("input_layernorm"), p}, outDrop...)...)
	default:
		block = seq(
			res(append([]core.Layer{ln("input_layernorm")}, attnPart...)...),
			res(append([]core.Layer{ln("post_attention_layernorm"), mlp}, outDrop...)...),
		)
	}
	ls := []core.Layer{
		&nn.Embedding{Name: "word_embeddings", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "h", Layer: block, N: layers},
		ln("ln_f"),
	}
	return c.finish(head, ls, vocab, tie)
}

// setFalconShared sets Falcon's attention layers to transformers 5.25's
// shared attention path (falconSharedSince) or 4.x's.
func setFalconShared(layers []core.Layer, on bool) {
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if a, ok := l.(*nn.Attention); ok {
			a.RepeatKV, a.SoftmaxFP32, a.MaskAdd = on, on, on
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	for _, l := range layers {
		walk(l)
	}
}
