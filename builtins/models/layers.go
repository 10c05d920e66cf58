package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// layerBuiltins: the building blocks of DESIGN.md section 2.1. Each
// constructor builds a sim layer, validates it at once (so errors point at
// the constructor call) and wraps it with NewLayer.
func LayerBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "linear",
			Sig:  "linear(in_features, out_features, bias=False, name=None)",
			Doc: "A fully connected layer, nn.Linear(in_features, out_features, bias): " +
				"in_features * out_features weights (+ out_features with bias). It saves its input for backward.",
			Fn: linearFn,
		},
		{
			Name: "embedding",
			Sig:  "embedding(rows, dim, name=None)",
			Doc: "A token embedding, nn.Embedding(rows, dim): rows * dim weights. A model that starts " +
				"with an embedding reads token ids, so train() needs seq=. Its gradient is dense (rows x dim). " +
				"rows, the vocabulary, is at most 16,777,216 (2^24), the bound hf_config applies too.",
			Fn: embeddingFn,
		},
		{
			Name: "layernorm",
			Sig:  "layernorm(dim, bias=True, name=None)",
			Doc: "A layer norm over the last dim, nn.LayerNorm(dim): dim weights (+ dim biases). " +
				"On CUDA its mean and rstd are fp32 and it runs in fp32 under autocast.",
			Fn: layernormFn,
		},
		{
			Name: "rmsnorm",
			Sig:  "rmsnorm(dim, name=None)",
			Doc:  "An RMS norm over the last dim (Llama's LlamaRMSNorm): dim weights, computed in fp32.",
			Fn:   rmsnormFn,
		},
		{
			Name: "gemma_norm",
			Sig:  "gemma_norm(dim, name=None)",
			Doc: "Gemma's RMS norm over the last dim (GemmaRMSNorm, Gemma 2's and Gemma 3's): dim weights; it runs in fp32 and " +
				"scales by 1 + weight before the cast back, so it keeps the fp32 normalised rows and an fp32 1 + weight " +
				"where rmsnorm() keeps a copy of the rows in the activations' dtype.",
			Fn: gemmaNormFn,
		},
		{
			Name: "attention",
			Sig: "attention(dim, heads, kv_heads=None, head_dim=None, qkv_bias=False, out_bias=False, " +
				"impl=\"flash\", causal=True, dropout=0.0, rope=False, fused_qkv=None, softmax_fp32=None, qk_norm=False, softcap=None, " +
				"window=None, sinks=False, enable_gqa=False, output_gate=False, rope_tables=None, rope_dim=None, mrope=False, rope_cat=False, rope_tables_fp32=False, " +
				"eager_mask=False, proj_names=None, self_name=None, name=None)",
			Doc: "Multi-head self-attention with q, k, v and output projections. " +
				"kv_heads < heads is grouped-query attention (1: multi-query); head_dim defaults to dim/heads. " +
				"impl is the kernel: \"flash\" (flash-attn 2: saves q, k, v, the output and an fp32 logsumexp), " +
				"\"sdpa\" (torch SDPA as Hugging Face calls it: k and v expanded to all heads first), " +
				"\"flex\" (torch's FlexAttention compiled, as torchtitan runs it: flash's saved set, kv heads as they are, " +
				"fp32 max_scores and delta as its only workspaces; priced as flash) or " +
				"\"eager\" (saves the scores' softmax and dropout mask: memory grows with seq²). " +
				"dropout applies to the attention probabilities and the output projection (GPT-2 placement). " +
				"rope adds rotary embeddings to q and k. rope_tables=\"rotary_emb\" (with rope) names the rotary module whose " +
				"cos and sin ([1, seq, head_dim] each, in the parameters' dtype) transformers makes once a forward and every " +
				"layer's rope saves: the layers that name the same module share one pair (the zoo's decoders name \"rotary_emb\", " +
				"as hf_config does); None counts no pair. rope_dim=d makes them d wide (partial rotary: GLM-4.5's and Qwen3-Next's " +
				"rotated share of the head; gpt-oss's half a head); mrope=True makes them [batch, seq, width] (the vision-language " +
				"models' multimodal positions, one row a sample); rope_tables_fp32=True keeps them in fp32 whatever the parameters' dtype " +
				"(OLMo 2's rotary_emb returns them uncast). rope_cat=True (with rope): the rotary embedding ends in a torch.cat of the " +
				"rotated and the passed dimensions (Phi-3's, GPT-NeoX's), which leaves q head major; the flash kernels' output follows q's " +
				"layout, so o_proj saves a contiguous copy of it, one [tokens, heads x head_dim] tensor a layer (eager attention makes that " +
				"copy anyway; CUDA's memory-efficient kernel, which SDPA runs given a mask or in fp32, does not). eager_mask=True: " +
				"impl=\"eager\" adds the one float mask transformers makes a forward ([batch, 1, seq, seq] in the parameters' dtype, shared " +
				"by the layers: alive from the first layer to the last, and into the backward under checkpointing); the zoo's decoders " +
				"set it, as hf_config does. fused_qkv uses one qkv projection (GPT-2's c_attn); " +
				"by default it is off with rope or grouped-query attention, on otherwise. softmax_fp32 " +
				"computes the eager softmax in fp32 (Hugging Face Llama); by default it follows rope. " +
				"qk_norm adds an RMS norm over each head of q and k before rope (Qwen3's; \"gemma\": gemma_norm's, in fp32 with 1 + weight, " +
				"Gemma 3's and Qwen3-Next's; \"olmo2_head\": olmo2_norm's over each head, the weight times the fp32 rows, AFMoE's; \"olmo2\": OLMo 2's q_norm and k_norm, one RMS norm over all of q's heads and one over all of k's, " +
				"(heads + kv_heads) x head_dim weights, run on the projections' whole outputs before the heads are split, so " +
				"tensor parallelism is refused; \"olmoe\": the same two norms as Llama's RMSNorm, the rows cast back before the weight, OLMoE's). " +
				"softcap=c soft-caps the scores, c * tanh(scores / c) (Gemma 2's attn_logit_softcapping): " +
				"with impl=\"eager\" tanh keeps one more scores-sized tensor; flash-attn caps inside its kernel. " +
				"window=w is a sliding window (each query attends to the last w keys: Gemma's local layers, gpt-oss): " +
				"flash computes only the window, eager still builds the whole score matrix. sinks adds gpt-oss's " +
				"attention sinks, a learned logit per head in each row's softmax (heads more weights). " +
				"enable_gqa=True hands impl=\"sdpa\" the kv heads as they are when no mask is needed, as transformers 4.54 and later do " +
				"(causal, no window or sinks, head_dim up to 256, runtime cuda or cpu): no repeat_kv copies (hf_config sets it by its transformers= version). " +
				"output_gate=True is Qwen3-Next's and Qwen3.5's gated attention: q_proj also yields a gate per channel " +
				"(heads x head_dim more weights) and the attention output is multiplied by its sigmoid before o_proj, which keeps " +
				"two more [tokens, heads x head_dim] tensors (the sigmoid and the product); with qk_norm=True q is normed per head (Qwen3-Next's), without it q is the projection's strided half as it is (MiniCPM5's); it needs fused_qkv=False. " +
				"output_gate=\"gate_proj\" is AFMoE's: the gate is a projection of its own, gate_proj (dim x heads x head_dim weights, no bias), " +
				"whose sigmoid multiplies the attention output before o_proj, keeping the same two tensors. " +
				"proj_names names the projections as the model's module tree does: four (q, k, v, out; default (\"q_proj\", " +
				"\"k_proj\", \"v_proj\", \"o_proj\"); BERT's (\"query\", \"key\", \"value\", \"output.dense\")) or, with fused_qkv, " +
				"two (qkv, out; default (\"qkv\", \"o_proj\"); GPT-2's (\"c_attn\", \"c_proj\")); a dotted name is a path below the " +
				"attention. self_name is a module inside it that holds the q, k and v projections and runs the kernel, the output " +
				"projection beside it (BERT's \"self\": attention.self.query, attention.output.dense).",
			Fn: attentionFn,
		},
		{
			Name: "mlp",
			Sig:  "mlp(dim, hidden, act=\"gelu\", bias=False, dropout=0.0, fused=False, proj_names=None, out_module=None, name=None)",
			Doc: "The transformer feed-forward block. act is gelu, relu, relu2 (squared ReLU: Nemotron-H's), silu, tanh or sigmoid, or one of transformers' " +
				"GELUs written as Python arithmetic (gelu_new: GPT-2's, 8 kernels saving 4 tensors; gelu_fast; gelu_python; quick_gelu) " +
				"or xielu (Apertus's xIELU, its Python path: two trained scalars, act_fn.alpha_p and alpha_n) " +
				"(fc1, act, fc2: 2 * dim * hidden weights) or the gated swiglu or geglu " +
				"(gate, up, act(gate) * up, down: 3 * dim * hidden weights, as in Llama). dropout drops its output. " +
				"fused=True (swiglu or geglu, no bias or dropout) is Granite's GLU: one input_linear (dim -> 2 * hidden) whose " +
				"output is chunked into gate and up, then output_linear; that one output is what both halves keep. " +
				"proj_names names the projections as the model's module tree does: two names (in, out) for an ungated MLP " +
				"(default (\"fc1\", \"fc2\"); Nemotron-H's (\"up_proj\", \"down_proj\")), three (gate, up, down) for a gated one " +
				"(default (\"gate_proj\", \"up_proj\", \"down_proj\")), or two (gate_up, down) for a gated one whose gate and up are one " +
				"projection chunked in two (Phi-3's (\"gate_up_proj\", \"down_proj\"): its one output what both halves keep, one LoRA target). out_module (an ungated MLP) puts the second projection " +
				"and the dropout after it in a sibling module of that name, name holding the first and the activation (BERT's " +
				"intermediate and output: mlp(..., proj_names=[\"dense\", \"dense\"], out_module=\"output\", name=\"intermediate\")).",
			Fn: mlpFn,
		},
		{
			Name: "moe",
			Sig: "moe(dim, hidden, experts, top_k, act=\"swiglu\", shared_experts=0, shared_hidden=None, capacity=None, impl=\"loop\", router=\"softmax\", norm_topk=True, " +
				"router_bias=False, expert_bias=False, score_bias=False, shared_gate=False, group_limited=False, router_name=None, router_logits_fp32=False, clamped_glu=False, name=None)",
			Doc: "A mixture-of-experts feed-forward block: a router (dim x experts) picks top_k experts per token, " +
				"each expert an mlp(dim, hidden, act); outputs weighted by the routing weights and summed per token. " +
				"impl is how the experts are stored and run: \"loop\" (one nn.Linear per expert projection and a loop " +
				"over the experts: transformers 4.x Mixtral, Qwen-MoE, DeepSeek-V3; quant= and lora= reach every expert and " +
				"the nn.Linear router), \"fused_loop\" (the same loop over 3-D expert parameters: gpt-oss, transformers 5) " +
				"or \"grouped\" (tokens permuted by expert, one grouped GEMM per projection: Megatron, torchtitan; with precision=\"megatron\" as Megatron-Core 0.13 runs them, a fused SwiGLU weighting the rows by their routing weights and an unpermute that keeps no copy of the outputs, on Transformer Engine's grouped GEMM with its per-stream cuBLAS workspaces) " +
				"or \"sequential\" (Megatron-Core's SequentialMLP, without --moe-grouped-gemm: under precision=\"megatron\" a Transformer Engine MLP per local expert over its rows, the same tensors as \"grouped\" without the grouped GEMM's workspaces; not under float8=; under other precisions \"grouped\") " +
				"or \"grouped_mm\" (transformers 5's default experts_implementation: the routed copies sorted by expert, one torch grouped_mm " +
				"per projection over 3-D weights in the weights' dtype, each GEMM's output copied with its sentinel rows zeroed, weighted, " +
				"put back in token order and summed per token; it keeps one index per routed copy more than the loop and not the loop's " +
				"per-expert index_add_ sources) or \"dense_bmm\" (Llama 4's Llama4TextExperts as transformers runs it: every token repeated for every expert, " +
				"weighted by its router score, zero off its top_k, and two bmm over the 3-D weights: experts times the routed FLOPs and saved activations; with router=\"topk_sigmoid\" only, no ep or tp); " +
				"bitsandbytes and PEFT do not reach fused or grouped experts, which stay in the params dtype. " +
				"router: \"softmax\" (fp32 softmax then top-k, Mixtral), \"topk_softmax\" (softmax over the top-k logits, " +
				"gpt-oss), \"sigmoid\" (DeepSeek-V3: fp32 sigmoid scores, selection with an aux-loss-free correction bias, " +
				"no optimizer state) or \"topk_sigmoid\" (Llama 4: an nn.Linear router, top-k of the logits, an fp32 sigmoid of the scattered top-k); norm_topk renormalises the top-k weights. " +
				"Routing is balanced; with expert parallelism parallel(expert_load=) gives the busiest rank's share, " +
				"and memory and time follow that rank. " +
				"shared_experts adds always-on experts (DeepSeek style: shared_experts; beside router=\"topk_sigmoid\" Llama 4's one, named shared_expert) of shared_hidden (default hidden) units each; " +
				"shared_gate=True makes them Qwen2-MoE's and Qwen3-Next's shared_expert, scaled by the sigmoid of shared_expert_gate (dim weights); " +
				"capacity is a capacity factor (>= 1): every expert gets exactly ceil(capacity * tokens * top_k / experts) rows " +
				"(dropped beyond, padded below); None is dropless. router_bias and expert_bias add biases to the router " +
				"and the expert projections (gpt-oss); score_bias is DeepSeek-V3's correction bias, a buffer; score_bias=\"parameter\" (router=\"sigmoid\") " +
				"makes it an nn.Parameter without gradient, counted with the parameters but given no gradient or optimizer state (AFMoE's expert_bias). " +
				"group_limited=True is DeepSeek-V2's softmax router with topk_method \"group_limited_greedy\" (DeepseekV2TopkRouter): " +
				"the probabilities outside the best expert groups are zeroed before the top-k by a masked_fill that keeps a bool " +
				"[tokens, experts] mask; it needs router=\"softmax\". router_name names the softmax or sigmoid router's module " +
				"(default \"gate\"; Jamba's is \"router\", AFMoE's \"router.gate\"). router_logits_fp32=True (router=\"topk_softmax\") upcasts the router's " +
				"logits to fp32 before the top-k, so the softmax keeps fp32 weights (Granite's GraniteMoeTopKRouter). " +
				"clamped_glu=True (act=\"swiglu\") is gpt-oss's gate (GptOssExperts._apply_gate, transformers 4.55 to 5.25): gate clamped to at most limit, " +
				"up to [-limit, limit], (up + 1) * gate * sigmoid(gate * alpha); it keeps the clamped gate, the sigmoid, their product and up + 1 " +
				"besides the projection's output, three more [rows, hidden] tensors per expert than SwiGLU; impl=\"grouped\" under precision=\"megatron\" runs Megatron-Core's fused SwiGLU kernel instead, without the clamp.",
			Fn: moeFn,
		},
		{
			Name: "dropout",
			Sig:  "dropout(p, name=None)",
			Doc:  "Dropout with probability p in [0, 1): saves a one-byte mask per element when p > 0.",
			Fn:   dropoutFn,
		},
		{
			Name: "act",
			Sig:  "act(kind, name=None)",
			Doc:  "An elementwise activation: kind is gelu, relu, silu, tanh or sigmoid, or gelu_new, gelu_fast, gelu_python or quick_gelu (transformers' Python-arithmetic GELUs, as their eager ops save).",
			Fn:   actFn,
		},
		{
			Name: "sequential",
			Sig:  "sequential(*layers, name=None)",
			Doc: "Runs layers one after another; a list of layers may be passed as well. " +
				"name becomes part of every module path below it.",
			Fn: sequentialFn,
		},
		{
			Name: "repeat",
			Sig:  "repeat(layer, n=None, name=None)",
			Doc: "n copies of layer (the transformer blocks), named name.0 ... name.(n-1) " +
				"(name defaults to \"layers\"). Each copy is a block for checkpoint=\"full\" and checkpoint(every=k), " +
				"and pipeline stages split the blocks. layer may be a list of blocks that differ, in order " +
				"(repeat([dense] * 3 + [sparse] * 58): DeepSeek's dense then MoE layers, local and global attention " +
				"layers, a hybrid's Mamba and attention layers); n is then the list's length.",
			Fn: repeatFn,
		},
		{
			Name: "residual",
			Sig:  "residual(layer, fp32=False, name=None)",
			Doc: "x + layer(x): a residual connection around layer, which must keep the width. fp32=True keeps the " +
				"residual stream in fp32, as transformers' Mamba and Mamba-2 blocks do with residual_in_fp32 (MambaBlock, " +
				"Mamba2Block): layer reads x cast to the parameters' dtype and its output is added to x in fp32, so the " +
				"sum, the next block's input, is fp32 (end the stack with to_params_dtype() before the head).",
			Fn: residualFn,
		},
	}
}

// newLayer validates l (named by its label, else its kind) and wraps it
// with the caller's position. A validation error is raised by the
// constructor call itself, so it needs no separate declaration position.
func newLayer(thread *starlark.Thread, l core.Layer) (starlark.Value, error) {
	path := l.Label()
	if path == "" {
		path = l.Kind()
	}
	if err := core.ValidateLayer(l, path); err != nil {
		return nil, err
	}
	return NewLayer(l, host.CallerPos(thread)), nil
}

// optName unpacks name=None|string.
func optName(v starlark.Value) (string, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return "", nil
	case starlark.String:
		if v == "" {
			return "", fmt.Errorf("name must not be empty (pass None for no name)")
		}
		return string(v), nil
	}
	return "", fmt.Errorf("name must be a string or None (got %s)", v.Type())
}

// optInt unpacks an int argument that may be None (returning def).
func OptInt(v starlark.Value, what string, def int64) (int64, error) {
	if v == nil || v == starlark.None {
		return def, nil
	}
	return host.AsInt64(v, what)
}

// optBool unpacks a bool argument that may be None (returning def).
func optBool(v starlark.Value, what string, def bool) (bool, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return def, nil
	case starlark.Bool:
		return bool(v), nil
	}
	return false, fmt.Errorf("%s must be True, False or None (got %s)", what, v.Type())
}

// intArg is one required int argument: its value, its name, where it goes.
type intArg struct {
	v    starlark.Value
	what string
	dst  *int64
}

// ints converts several int arguments at once.
func ints(args ...intArg) error {
	for _, a := range args {
		n, err := host.AsInt64(a.v, a.what)
		if err != nil {
			return err
		}
		*a.dst = n
	}
	return nil
}

// asLayer unwraps a layer argument.
func asLayer(v starlark.Value, what string) (core.Layer, error) {
	if l, ok := v.(*Layer); ok {
		return l.Sim(), nil
	}
	return nil, fmt.Errorf("%s must be a layer (got %s)", what, v.Type())
}

func linearFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var in, out, name starlark.Value
	var bias bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "in_features", &in, "out_features", &out, "bias?", &bias, "name?", &name); err != nil {
		return nil, err
	}
	l := &nn.Linear{Bias: bias}
	if err := ints(intArg{in, "in_features", &l.In}, intArg{out, "out_features", &l.Out}); err != nil {
		return nil, err
	}
	var err error
	if l.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, l)
}

func embeddingFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rows, dim, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rows", &rows, "dim", &dim, "name?", &name); err != nil {
		return nil, err
	}
	e := &nn.Embedding{}
	if err := ints(intArg{rows, "rows", &e.Rows}, intArg{dim, "dim", &e.Dim}); err != nil {
		return nil, err
	}
	var err error
	if e.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, e)
}

func layernormFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	bias := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "bias?", &bias, "name?", &name); err != nil {
		return nil, err
	}
	return normLayer(thread, dim, name, func(d int64, n string) core.Layer { return &nn.Norm{Name: n, Dim: d, Bias: bias} })
}

func rmsnormFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "name?", &name); err != nil {
		return nil, err
	}
	return normLayer(thread, dim, name, func(d int64, n string) core.Layer { return &nn.Norm{Name: n, Dim: d, RMS: true} })
}

func gemmaNormFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "name?", &name); err != nil {
		return nil, err
	}
	return normLayer(thread, dim, name, func(d int64, n string) core.Layer { return &nn.GemmaNorm{Name: n, Dim: d} })
}

// normLayer unpacks a norm's dim and name=None|string and builds the
// layer from them (layernorm, rmsnorm, gemma_norm).
func normLayer(thread *starlark.Thread, dim, name starlark.Value, build func(dim int64, name string) core.Layer) (starlark.Value, error) {
	var d int64
	if err := ints(intArg{dim, "dim", &d}); err != nil {
		return nil, err
	}
	n, err := optName(name)
	if err != nil {
		return nil, err
	}
	return newLayer(thread, build(d, n))
}

// optProb unpacks a probability (0.0 when absent); the range is checked
// by the sim layer.
func OptProb(v starlark.Value, what string) (float64, error) {
	if v == nil || v == starlark.None {
		return 0, nil
	}
	return host.AsFloat(v, what)
}

func dropoutFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var p, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "p", &p, "name?", &name); err != nil {
		return nil, err
	}
	d := &nn.Dropout{}
	var err error
	if d.P, err = host.AsFloat(p, "p"); err != nil {
		return nil, err
	}
	if d.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, d)
}

func actFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var kind string
	var name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "kind", &kind, "name?", &name); err != nil {
		return nil, err
	}
	a := &nn.Act{Fn: kind}
	var err error
	if a.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, a)
}

// layerList flattens layer arguments, allowing lists and tuples of layers.
func layerList(args starlark.Tuple, what string) ([]core.Layer, error) {
	var out []core.Layer
	for i, v := range args {
		if seq, ok := v.(starlark.Indexable); ok {
			if _, isStr := v.(starlark.String); !isStr {
				for j := 0; j < seq.Len(); j++ {
					l, err := asLayer(seq.Index(j), fmt.Sprintf("%s[%d][%d]", what, i, j))
					if err != nil {
						return nil, err
					}
					out = append(out, l)
				}
				continue
			}
		}
		l, err := asLayer(v, fmt.Sprintf("%s[%d]", what, i))
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func sequentialFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "name?", &name); err != nil {
		return nil, err
	}
	layers, err := layerList(args, "layers")
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("sequential needs at least one layer")
	}
	s := &core.Sequential{Layers: layers}
	if s.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, s)
}

func repeatFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var layer, n, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "layer", &layer, "n?", &n, "name?", &name); err != nil {
		return nil, err
	}
	r := &core.Repeat{}
	var err error
	if list, ok := layer.(*starlark.List); ok {
		if list.Len() == 0 {
			return nil, fmt.Errorf("repeat: the list of blocks is empty")
		}
		for i := 0; i < list.Len(); i++ {
			l, err := asLayer(list.Index(i), fmt.Sprintf("layer[%d]", i))
			if err != nil {
				return nil, err
			}
			r.Blocks = append(r.Blocks, l)
		}
		if n != nil && n != starlark.None {
			if k, err := host.AsInt64(n, "n"); err != nil || k != int64(list.Len()) {
				return nil, fmt.Errorf("repeat: n=%s but the list holds %d blocks (leave n out)", n, list.Len())
			}
		}
	} else {
		if r.Layer, err = asLayer(layer, "layer"); err != nil {
			return nil, err
		}
		if n == nil || n == starlark.None {
			return nil, fmt.Errorf("repeat: n is required for one layer (or pass a list of blocks)")
		}
		if r.N, err = host.AsInt64(n, "n"); err != nil {
			return nil, err
		}
	}
	if r.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, r)
}

func residualFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var layer, name starlark.Value
	var fp32 bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "layer", &layer, "fp32?", &fp32, "name?", &name); err != nil {
		return nil, err
	}
	l, err := asLayer(layer, "layer")
	if err != nil {
		return nil, err
	}
	r := &core.Residual{Layer: l, FP32: fp32}
	if r.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, r)
}
