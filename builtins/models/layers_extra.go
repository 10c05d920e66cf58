package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// extraLayerBuiltins: the layer kinds some Hugging Face families need
// beyond DESIGN.md 2.1 (learned positions, parallel blocks, Gemma's
// embedding scale, BERT's pooler). hf_config builds the same sim layers.
func ExtraLayerBuiltins() []host.Builtin {
	return append(append(append(append(append(extraLayerBuiltins(), gemma4LayerBuiltins()...), qwen3VLLayerBuiltins()...), llama4LayerBuiltins()...),
		pixtralLayerBuiltins()...), olmo2LayerBuiltins()...)
}

func extraLayerBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "add_embedding",
			Sig:  "add_embedding(rows, dim, per_sample=False, max_seq=None, buffer=None, buffer_len=None, buffer_ids=False, name=None)",
			Doc: "Adds a learned table lookup to the hidden states: learned position embeddings " +
				"(GPT-2's wpe, OPT, BERT) or BERT's token-type embeddings, rows * dim weights. " +
				"per_sample looks up one row of ids per sequence (OPT's positions, BERT's token types) " +
				"instead of one [1, seq] row broadcast over the batch (GPT-2's and BERT's positions). " +
				"max_seq is the longest sequence the table serves (a longer seq= is an error); " +
				"by default any, as for token types. " +
				"buffer and buffer_len: the non-persistent int64 buffer [1, buffer_len] the ids come from, registered " +
				"as the module's (BERT's position_ids and token_type_ids, max_position_embeddings long). " +
				"buffer_ids=True: the ids are a view of that buffer (BERT's position_ids[:, :seq]; transformers 4.x's " +
				"token types handed no token_type_ids), no new tensor; else a new int64 tensor of the output's rows.",
			Fn: addEmbeddingFn,
		},
		{
			Name: "scale",
			Sig:  "scale(factor, rebinds=False, buffer=False, name=None, within=None)",
			Doc: "Multiplies by a constant, with no parameters: Gemma's embedding normaliser, " +
				"scale(math.sqrt(dim)) after the embedding. Its output is a new tensor of the input's size. " +
				"It is no module of its own (transformers multiplies inline in a forward): the product, called name " +
				"(default \"scale\"), runs in the module of the layer it is in, or in that layer's child module within= " +
				"(within=\"embed_tokens\": a scaled embedding's forward, Gemma3TextScaledWordEmbedding's). " +
				"rebinds=True (after the embedding of a model with holds_embedding=True): the forward rebinds its " +
				"embeddings local to the product (Granite's inputs_embeds * embedding_multiplier), so the product is what " +
				"the model holds through its layers and the lookup's output dies here. " +
				"buffer=True: the factor is a 0-dim buffer in the parameters' dtype on the device (Gemma 3's and Gemma 4's " +
				"embed_scale in every transformers release, Gemma's and Gemma 2's from 5.4: input * embed_scale.to(weight.dtype)), " +
				"which the product keeps for backward; without, a host scalar (Gemma and Gemma 2 before 5.4).",
			Fn: scaleFn,
		},
		{
			Name: "to_params_dtype",
			Sig:  "to_params_dtype()",
			Doc: "x.to(the parameters' dtype), with no parameters: transformers' Mamba and Mamba-2 heads cast norm_f's " +
				"output, fp32 under residual(fp32=True), back before lm_head (lm_head(hidden_states.to(lm_head.weight.dtype))), " +
				"a new tensor the head saves. Nothing happens when x already has that dtype.",
			Fn: toParamsDtypeFn,
		},
		{
			Name: "mla",
			Sig: "mla(dim, heads, kv_lora_rank, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, " +
				"v_head_dim=128, bias=False, impl=\"flash\", causal=True, index_heads=None, index_head_dim=128, index_topk=2048, rope_tables=None, rope_complex=False, name=None)",
			Doc: "Multi-head latent attention (DeepSeek-V2/V3): q through a q_lora_rank latent (q_a_proj, RMS norm, " +
				"q_b_proj; None: a plain q_proj), keys and values through one kv_lora_rank latent plus a shared " +
				"rope key (kv_a_proj_with_mqa, RMS norm, kv_b_proj), heads of qk_nope_head_dim + qk_rope_head_dim for " +
				"q and k and v_head_dim for v, then o_proj. The latent is what an inference cache keeps; training saves " +
				"the full per-head keys and values the kernel reads (flash pads v to the q/k head dim, as transformers " +
				"does), its output and the merged heads. impl is \"flash\" or \"sdpa\". index_heads adds DeepSeek Sparse " +
				"Attention's lightning indexer (DeepSeek-V3.2, GLM-5) as transformers 5.17 runs it: wq_b, wk, k_norm and " +
				"weights_proj under no_grad (counted, never trained), fp32 scores of index_heads x index_head_dim per " +
				"query and key whose top index_topk keys mask the dense attention; a transient of 8 x index_heads bytes " +
				"per query and key (with a batch over 1, torch.matmul's copy of the keys per query adds 4 x index_head_dim), " +
				"the mask saved as SDPA's bias, every block computed. Needs q_lora_rank and impl=\"sdpa\". rope_tables=\"rotary_emb\" " +
				"names the rotary module whose cos and sin ([1, seq, qk_rope_head_dim] each) transformers makes once a forward and every " +
				"layer's rope saves (hf_config's DeepSeek-V3 family; None counts none). rope_complex=True rotates q_pe and k_pe as " +
				"DeepSeek-V2's apply_rotary_emb does (view_as_complex over fp32 copies) and builds the key in a new_empty buffer.",
			Fn: mlaFn,
		},
		{
			Name: "mamba2",
			Sig: "mamba2(dim, heads, head_dim=64, state=128, groups=1, conv_kernel=4, chunk=256, bias=False, " +
				"conv_bias=True, gated_norm=True, name=None)",
			Doc: "A Mamba-2 mixer (state-space duality) as transformers' Mamba2Mixer trains it with the mamba_ssm " +
				"kernels: in_proj (dim -> 2*inner + 2*groups*state + heads, inner = heads*head_dim), a depthwise " +
				"causal conv1d, the chunked selective scan, the gated RMS norm and out_proj in one autograd function. " +
				"It keeps in_proj's input and output, the scan output and the norm's rstd: a fixed amount per token " +
				"(nothing per chunk or per key; the backward recomputes the chunk states). Use it in " +
				"residual(sequential(rmsnorm(dim), mamba2(...))) blocks, alone or beside attention blocks (a hybrid).",
			Fn: mamba2Fn,
		},
		{
			Name: "gated_deltanet",
			Sig: "gated_deltanet(dim, key_heads=16, value_heads=32, key_head_dim=128, value_head_dim=128, conv_kernel=4, " +
				"split_proj=False, kernel=\"fla\", fused_norm=False, name=None)",
			Doc: "A Gated DeltaNet linear-attention mixer (Qwen3-Next's and Qwen3.5's linear_attn) as transformers trains it: " +
				"in_proj_qkvz and in_proj_ba (split_proj: Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b and in_proj_a), a depthwise " +
				"causal conv1d over q, k and v with silu, beta and the log decay g per value head (dt_bias, A_log), the chunked " +
				"gated delta rule (64-token chunks; q and k l2-normed and repeated to the value heads), a gated RMS norm per value " +
				"head and out_proj. kernel \"fla\" is flash-linear-attention's chunk_gated_delta_rule with causal-conv1d's kernel, " +
				"what transformers runs when both are installed: a fixed amount kept per token, the chunk states recomputed in " +
				"backward. \"torch\" is transformers' fallback without them (torch_chunk_gated_delta_rule, F.conv1d): in fp32 on the " +
				"sequence padded to whole chunks, keeping five 64 x 64 matrices per chunk and value head and every chunk's " +
				"key_head_dim x value_head_dim state. fused_norm is fla's FusedRMSNormGated (transformers before 5.15 with fla) " +
				"instead of the torch ops of Qwen3NextRMSNormGated. Use it in residual(sequential(rmsnorm(dim), gated_deltanet(...))) " +
				"blocks beside gated attention (attention(..., qk_norm=True, output_gate=True)).",
			Fn: gatedDeltaNetFn,
		},
		{
			Name: "mamba",
			Sig:  "mamba(dim, state=16, conv_kernel=4, expand=2, dt_rank=None, bias=False, conv_bias=True, impl=\"jamba\", name=None)",
			Doc: "A Mamba (Mamba-1) mixer as Jamba's layers run it (transformers' JambaMambaMixer with the mamba_ssm " +
				"kernels): in_proj (dim -> 2*inner, inner = expand*dim), a depthwise causal conv1d with silu, x_proj " +
				"(inner -> dt_rank + 2*state) with RMS norms on dt, B and C, dt_proj (dt_rank -> inner) and " +
				"selective_scan_fn, then out_proj. It keeps in_proj's input and output, the conv output, the copies " +
				"the scan and the linears make of their transposed inputs, the scan output and fp32 chunk states " +
				"every 2,048 tokens: a fixed amount per token. dt_rank defaults to ceil(dim / 16). Use it in " +
				"residual(sequential(rmsnorm(dim), mamba(...))) blocks beside attention blocks (a hybrid). " +
				"impl=\"fused\" is transformers' MambaMixer (Mamba-1 models, no inner norms) with the kernels: " +
				"mamba_inner_fn, which keeps xz, x_dbl, B, C, the chunk states and the scan output and recomputes " +
				"the conv output and delta in backward; impl=\"slow\" is its PyTorch path without the kernels, which " +
				"keeps fp32 [batch, inner, seq, state] tensors and one state per token.",
			Fn: mambaFn,
		},
		{
			Name: "vision_tower",
			Sig: "vision_tower(dim, depth, heads, hidden, text_dim, patch=14, temporal_patch=2, merge=2, window=None, " +
				"full_blocks=[], impl=\"flash\", name=None)",
			Doc: "A ViT image encoder whose image tokens join the text, as Qwen2.5-VL runs it: each image of " +
				"train(images=(count, height, width)) is resized to a multiple of patch*merge pixels and cut into " +
				"patch x patch (x temporal_patch) patches, embedded (patch_embed), run through depth blocks of " +
				"attention (heads, biases, 2-D rotary, not causal) and a gated MLP of hidden units, then merged merge x merge " +
				"into one token of text_dim (the merger); the tokens replace the image placeholders of the text embeddings " +
				"(place it after the embedding). window=w pixels makes every block not in full_blocks attend within " +
				"w/patch patches a side; the others attend within their image. impl=\"flash\" runs every window in one " +
				"varlen kernel; \"sdpa\" runs one kernel per window and concatenates the outputs (a copy o_proj saves); " +
				"eager is not modelled. Without images the weights are held and nothing runs.",
			Fn: visionTowerFn,
		},
		{
			Name: "pooler",
			Sig:  "pooler(dim, name=None)",
			Doc: "BERT's pooler: the first token's hidden state through a dim x dim linear with bias and tanh " +
				"(dim * dim + dim weights); the output has one row per sequence.",
			Fn: poolerFn,
		},
	}
}

func mlaFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, heads, kvLora, qLora, name, indexHeads, tables starlark.Value
	nope, ropeDim, vDim := starlark.Value(starlark.MakeInt(128)), starlark.Value(starlark.MakeInt(64)), starlark.Value(starlark.MakeInt(128))
	indexDim, indexTopK := starlark.Value(starlark.MakeInt(128)), starlark.Value(starlark.MakeInt(2048))
	var bias, ropeComplex bool
	impl, causal := "flash", true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "heads", &heads, "kv_lora_rank", &kvLora,
		"q_lora_rank?", &qLora, "qk_nope_head_dim?", &nope, "qk_rope_head_dim?", &ropeDim, "v_head_dim?", &vDim,
		"bias?", &bias, "impl?", &impl, "causal?", &causal, "index_heads?", &indexHeads, "index_head_dim?", &indexDim,
		"index_topk?", &indexTopK, "rope_tables?", &tables, "rope_complex?", &ropeComplex, "name?", &name); err != nil {
		return nil, err
	}
	a := &nn.MLA{Bias: bias, Impl: impl, Causal: causal, RopeComplex: ropeComplex}
	if err := ints(intArg{dim, "dim", &a.Dim}, intArg{heads, "heads", &a.Heads}, intArg{kvLora, "kv_lora_rank", &a.KVLora},
		intArg{nope, "qk_nope_head_dim", &a.Nope}, intArg{ropeDim, "qk_rope_head_dim", &a.RopeDim}, intArg{vDim, "v_head_dim", &a.VDim}); err != nil {
		return nil, err
	}
	var err error
	if a.QLoraRank, err = OptInt(qLora, "q_lora_rank", 0); err != nil {
		return nil, err
	}
	if qLora != nil && qLora != starlark.None && a.QLoraRank <= 0 {
		return nil, fmt.Errorf("mla: q_lora_rank must be positive (got %d; None for a plain q_proj)", a.QLoraRank)
	}
	if indexHeads != nil && indexHeads != starlark.None {
		ix := &nn.DSAIndexer{}
		if err := ints(intArg{indexHeads, "index_heads", &ix.Heads}, intArg{indexDim, "index_head_dim", &ix.HeadDim},
			intArg{indexTopK, "index_topk", &ix.TopK}); err != nil {
			return nil, err
		}
		a.Indexer = ix
	}
	if a.RopeTables, err = ropeTablesArg("mla", tables, true); err != nil {
		return nil, err
	}
	if a.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, a, mlaKeywords)
}

func mamba2Fn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, heads, name starlark.Value
	headDim, state, groups, conv, chunk := starlark.Value(starlark.MakeInt(64)), starlark.Value(starlark.MakeInt(128)),
		starlark.Value(starlark.MakeInt(1)), starlark.Value(starlark.MakeInt(4)), starlark.Value(starlark.MakeInt(256))
	bias, convBias, gated := false, true, true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "heads", &heads, "head_dim?", &headDim,
		"state?", &state, "groups?", &groups, "conv_kernel?", &conv, "chunk?", &chunk, "bias?", &bias,
		"conv_bias?", &convBias, "gated_norm?", &gated, "name?", &name); err != nil {
		return nil, err
	}
	m := &nn.Mamba2{Bias: bias, ConvBias: convBias, GatedNorm: gated}
	if err := ints(intArg{dim, "dim", &m.Dim}, intArg{heads, "heads", &m.Heads}, intArg{headDim, "head_dim", &m.HeadDim},
		intArg{state, "state", &m.State}, intArg{groups, "groups", &m.Groups}, intArg{conv, "conv_kernel", &m.ConvK},
		intArg{chunk, "chunk", &m.Chunk}); err != nil {
		return nil, err
	}
	if m.Heads > 0 && m.HeadDim > 0 && m.Heads > (1<<40)/m.HeadDim {
		return nil, fmt.Errorf("mamba2: heads x head_dim is too large (%d x %d)", m.Heads, m.HeadDim)
	}
	m.Inner = m.Heads * m.HeadDim
	var err error
	if m.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, m, mamba2Keywords)
}

func mambaFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, dtRank, name starlark.Value
	state, conv, expand := starlark.Value(starlark.MakeInt(16)), starlark.Value(starlark.MakeInt(4)), starlark.Value(starlark.MakeInt(2))
	bias, convBias := false, true
	impl := nn.MambaJamba
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "state?", &state, "conv_kernel?", &conv,
		"expand?", &expand, "dt_rank?", &dtRank, "bias?", &bias, "conv_bias?", &convBias, "impl?", &impl, "name?", &name); err != nil {
		return nil, err
	}
	m := &nn.Mamba{Bias: bias, ConvBias: convBias, Impl: impl}
	var ex int64
	if err := ints(intArg{dim, "dim", &m.Dim}, intArg{state, "state", &m.State}, intArg{conv, "conv_kernel", &m.ConvK},
		intArg{expand, "expand", &ex}); err != nil {
		return nil, err
	}
	if ex <= 0 || m.Dim > (1<<40)/ex {
		return nil, fmt.Errorf("mamba: expand x dim must be positive and not too large (%d x %d)", ex, m.Dim)
	}
	m.Inner = ex * m.Dim
	var err error
	if m.DTRank, err = OptInt(dtRank, "dt_rank", (m.Dim+15)/16); err != nil {
		return nil, err
	}
	if m.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, m, mambaKeywords)
}

func visionTowerFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, depth, heads, hidden, textDim, window, name starlark.Value
	patch, temporal, merge := starlark.Value(starlark.MakeInt(14)), starlark.Value(starlark.MakeInt(2)), starlark.Value(starlark.MakeInt(2))
	var full *starlark.List
	impl := "flash"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "depth", &depth, "heads", &heads, "hidden", &hidden,
		"text_dim", &textDim, "patch?", &patch, "temporal_patch?", &temporal, "merge?", &merge, "window?", &window,
		"full_blocks?", &full, "impl?", &impl, "name?", &name); err != nil {
		return nil, err
	}
	v := &nn.VisionTower{InChans: 3, Impl: impl}
	if err := ints(intArg{dim, "dim", &v.Dim}, intArg{depth, "depth", &v.Depth}, intArg{heads, "heads", &v.Heads},
		intArg{hidden, "hidden", &v.Inter}, intArg{textDim, "text_dim", &v.TextDim}, intArg{patch, "patch", &v.Patch},
		intArg{temporal, "temporal_patch", &v.Temporal}, intArg{merge, "merge", &v.Merge}); err != nil {
		return nil, err
	}
	var err error
	if v.Window, err = OptInt(window, "window", 0); err != nil {
		return nil, err
	}
	if window != nil && window != starlark.None && v.Window <= 0 {
		return nil, fmt.Errorf("vision_tower: window must be positive (got %d; None for none)", v.Window)
	}
	if full != nil {
		for i := 0; i < full.Len(); i++ {
			x, err := host.AsInt64(full.Index(i), fmt.Sprintf("full_blocks[%d]", i))
			if err != nil {
				return nil, err
			}
			v.FullBlocks = append(v.FullBlocks, x)
		}
	}
	if v.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, v, visionTowerKeywords)
}

func addEmbeddingFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rows, dim, maxSeq, name, bufferLen starlark.Value
	var perSample, bufferIDs bool
	var bufferArg host.NoneOr[string]
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rows", &rows, "dim", &dim,
		"per_sample?", &perSample, "max_seq?", &maxSeq, "buffer?", &bufferArg, "buffer_len?", &bufferLen,
		"buffer_ids?", &bufferIDs, "name?", &name); err != nil {
		return nil, err
	}
	buffer := bufferArg.V
	e := &nn.AddEmbedding{PerSample: perSample, Buffer: buffer, BufferIDs: bufferIDs}
	if (buffer == "") != (bufferLen == nil || bufferLen == starlark.None) {
		return nil, fmt.Errorf("buffer and buffer_len go together (got buffer=%q, buffer_len=%v)", buffer, bufferLen)
	}
	if bufferIDs && buffer == "" {
		return nil, fmt.Errorf("buffer_ids=True needs the buffer the ids are a view of (buffer= and buffer_len=)")
	}
	if err := ints(intArg{rows, "rows", &e.Rows}, intArg{dim, "dim", &e.Dim}); err != nil {
		return nil, err
	}
	var err error
	if e.MaxSeq, err = OptInt(maxSeq, "max_seq", 0); err != nil {
		return nil, err
	}
	if maxSeq != nil && maxSeq != starlark.None && e.MaxSeq <= 0 {
		return nil, fmt.Errorf("max_seq must be positive (got %d)", e.MaxSeq)
	}
	if e.BufferLen, err = OptInt(bufferLen, "buffer_len", 0); err != nil {
		return nil, err
	}
	if e.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, e)
}

func ParallelFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "name?", &name); err != nil {
		return nil, err
	}
	branches, err := layerList(args, "branches")
	if err != nil {
		return nil, err
	}
	p := &nn.Parallel{Branches: branches}
	if p.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, p)
}

func toParamsDtypeFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return newLayer(thread, &nn.ToParams{})
}

func scaleFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var factor, name, within starlark.Value
	var rebinds, buffer bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "factor", &factor, "rebinds?", &rebinds, "buffer?", &buffer, "name?", &name, "within?", &within); err != nil {
		return nil, err
	}
	s := &nn.Scale{Rebinds: rebinds, Buffer: buffer}
	var err error
	if s.Factor, err = host.AsFloat(factor, "factor"); err != nil {
		return nil, err
	}
	if s.Name, err = optName(name); err != nil {
		return nil, err
	}
	if s.In, err = optName(within); err != nil {
		return nil, fmt.Errorf("scale: within: %w", err)
	}
	return newLayer(thread, s)
}

func poolerFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "name?", &name); err != nil {
		return nil, err
	}
	p := &nn.Pooler{}
	if err := ints(intArg{dim, "dim", &p.Dim}); err != nil {
		return nil, err
	}
	var err error
	if p.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, p)
}

// maxGDNSize bounds each size of gated_deltanet(): the products of two
// (in_proj's weight) stay far from int64 overflow.
const maxGDNSize = 1 << 24

func gatedDeltaNetFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	kh, vh, kd, vd, conv := starlark.Value(starlark.MakeInt(16)), starlark.Value(starlark.MakeInt(32)), starlark.Value(starlark.MakeInt(128)),
		starlark.Value(starlark.MakeInt(128)), starlark.Value(starlark.MakeInt(4))
	split, fused := false, false
	kernel := nn.GDNFla
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "key_heads?", &kh, "value_heads?", &vh, "key_head_dim?", &kd,
		"value_head_dim?", &vd, "conv_kernel?", &conv, "split_proj?", &split, "kernel?", &kernel, "fused_norm?", &fused, "name?", &name); err != nil {
		return nil, err
	}
	g := &nn.GatedDeltaNet{Chunk: 64, SplitProj: split, Kernel: kernel, FusedNorm: fused}
	sizes := []intArg{{dim, "dim", &g.Dim}, {kh, "key_heads", &g.KHeads}, {vh, "value_heads", &g.VHeads}, {kd, "key_head_dim", &g.KHeadDim},
		{vd, "value_head_dim", &g.VHeadDim}, {conv, "conv_kernel", &g.ConvK}}
	if err := ints(sizes...); err != nil {
		return nil, err
	}
	for _, s := range sizes {
		if *s.dst > maxGDNSize {
			return nil, fmt.Errorf("gated_deltanet: %s=%d is larger than memsh simulates (at most %d)", s.what, *s.dst, maxGDNSize)
		}
	}
	if g.KHeads*g.KHeadDim > maxGDNSize || g.VHeads*g.VHeadDim > maxGDNSize {
		return nil, fmt.Errorf("gated_deltanet: heads x head_dim is too large (keys %d x %d, values %d x %d)", g.KHeads, g.KHeadDim, g.VHeads, g.VHeadDim)
	}
	if fused && kernel == nn.GDNTorch {
		return nil, fmt.Errorf("gated_deltanet: fused_norm=True is fla's FusedRMSNormGated, and kernel=\"torch\" runs without fla (leave fused_norm out)")
	}
	var err error
	if g.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, g, gatedDeltaNetKeywords)
}
