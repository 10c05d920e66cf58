package importers

import (
	"fmt"
	"slices"
	"strings"
)

// megatronTrainer reads a Megatron-LM launch script: the command line it
// gives pretrain_gpt.py (interpreted as bash does, shell.go), read as
// Megatron's arguments.py reads it, its defaults where a flag is absent.
// The model is written in Starlark from the GPT flags (mcore's GPT layer:
// norm, attention, residual, norm, MLP, residual).
var megatronTrainer = &trainer{
	name:  "megatron",
	about: "a Megatron-LM launch script (bash) running pretrain_gpt.py: layers, hidden, heads, query groups, FFN, vocabulary, positions, norms, biases, dropouts, tp/pp/cp, sequence parallelism, recompute, micro and global batch, distributed optimizer, adam, sgd and Muon (--optimizer muon, dist_muon, --muon-*), bf16/fp16, Transformer Engine fp8 (--fp8-format, --fp8-recipe, --fp8-amax-history-len, --fp8-param-gather, --reuse-grad-buf-for-mxfp8-param-ag), mixture of experts (--num-experts, --moe-*, --expert-model-parallel-size, --expert-tensor-parallel-size)",
	exts:  []string{".sh", ".bash"},
	parse: parseMegatron,
	detect: func(t *tree) bool {
		_, ok := t.leaves["num-layers"]
		return ok
	},
	plan: megatronPlan,
	noEffect: []string{
		"data-path", "vocab-file", "merge-file", "split", "save", "load", "save-interval", "eval-interval", "eval-iters",
		"log-interval", "tensorboard-dir", "train-iters", "train-samples", "lr", "min-lr", "lr-decay-style", "lr-decay-iters",
		"lr-decay-samples", "lr-warmup-fraction", "lr-warmup-samples", "lr-warmup-iters", "decoupled-lr", "decoupled-min-lr",
		"weight-decay", "adam-beta1", "adam-beta2", "adam-eps", "init-method-std", "rampup-batch-size", "seed",
		"tokenizer-type", "tokenizer-model", "tiktoken-pattern", "mock-data", "data-cache-path", "no-mmap-bin-files",
		"num-workers", "log-throughput", "profile", "profile-step-start",
		"profile-step-end", "ckpt-format", "distributed-timeout-minutes", "exit-duration-in-mins", "manual-gc",
		"calculate-per-token-loss", "use-mcore-models", "rotary-base", "rotary-percent",
		"apply-layernorm-1p", "make-vocab-size-divisible-by", "max-position-embeddings",
		"fp8-amax-compute-algo", "launcher.*", "logging-level", "no-check-for-nan-in-loss-and-grad", "init-model-with-meta-device",
		// checkpointing, logging and data (the step is the same): Megatron-LM's functional tests set them
		"async-save", "async-ckpt-use-cpu-shm", "async-strategy", "ckpt-assume-constant-structure", "ckpt-fully-parallel-load",
		"ckpt-fully-parallel-save", "no-ckpt-fully-parallel-save", "dist-ckpt-optim-fully-reshardable", "dist-ckpt-strictness",
		"use-persistent-ckpt-worker", "use-checkpoint-opt_param-scheduler", "verify-integrity", "exit-interval", "timing-log-level",
		"log-memory-to-tensorboard", "log-timers-to-tensorboard", "log-validation-ppl-to-tensorboard", "manual-gc-interval",
		"fim-data", "fim-rate", "fim-spm-rate",
	},
}

// megatronValueFlags are the flags that take no value (store_true).
var megatronSwitches = map[string]bool{
	"bf16": true, "fp16": true, "swiglu": true, "group-query-attention": true, "untie-embeddings-and-output-weights": true,
	"disable-bias-linear": true, "sequence-parallel": true, "use-distributed-optimizer": true, "overlap-grad-reduce": true,
	"overlap-param-gather": true, "use-flash-attn": true, "recompute-activations": true, "apply-layernorm-1p": true,
	"grad-reduce-in-bf16": true, "cross-entropy-loss-fusion": true, "calculate-per-token-loss": true, "manual-gc": true,
	"use-mcore-models": true, "mock-data": true, "no-mmap-bin-files": true, "no-create-attention-mask-in-dataloader": true,
	"log-throughput": true, "profile": true, "fp8-param-gather": true, "reuse-grad-buf-for-mxfp8-param-ag": true, "accumulate-allreduce-grads-in-fp32": true,
	"account-for-embedding-in-pipeline-split": true, "account-for-loss-in-pipeline-split": true, "tp-comm-overlap": true,
	"use-megatron-fsdp": true, "use-torch-fsdp2": true, "fsdp-double-buffer": true, "fsdp-manual-registration": true, "use-nccl-ub": true,
	"init-model-with-meta-device": true, "no-check-for-nan-in-loss-and-grad": true, "no-gradient-accumulation-fusion": true,
	"muon-nesterov": true, "muon-no-split-qkv": true, "muon-use-syrk": true, "no-use-layer-wise-param-layout": true, // megatron_muon.go
	"async-save": true, "async-ckpt-use-cpu-shm": true, "ckpt-assume-constant-structure": true, "ckpt-fully-parallel-load": true,
	"ckpt-fully-parallel-save": true, "no-ckpt-fully-parallel-save": true, "dist-ckpt-optim-fully-reshardable": true,
	"use-persistent-ckpt-worker": true, "use-checkpoint-opt_param-scheduler": true, "verify-integrity": true,
	"log-memory-to-tensorboard": true, "log-timers-to-tensorboard": true, "log-validation-ppl-to-tensorboard": true,
	"log-params-norm": true, "log-num-zeros-in-grad": true, "deterministic-mode": true, "fim-data": true,
	"attention-softmax-in-fp32": true, "apply-query-key-layer-scaling": true, "no-bias-gelu-fusion": true, "no-rope-fusion": true,
	"use-tp-pp-dp-mapping": true, // megatron_run_flags.go
}

// parseMegatron reads the script's pretrain_gpt.py command line into a
// tree: --flag value pairs by flag name, switches as true, a flag's
// several values as a list; the launcher's name under launcher.name.
func parseMegatron(file string, data []byte) (*tree, error) {
	args, launcher, err := launchArgs(file, data, "pretrain_gpt.py", func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	t := newTree(file)
	t.leaves["launcher.name"] = leaf{value: launcher}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok || name == "" {
			return nil, &Error{File: file, Msg: fmt.Sprintf("pretrain_gpt.py argument %s is not a --flag", quoteKey(a)),
				Hint: "memsh reads --flag value pairs"}
		}
		name, inline, hasInline := strings.Cut(name, "=")
		var vals []string
		if hasInline {
			vals = []string{inline}
		} else if !megatronSwitches[name] && !slices.Contains(megatronMoESwitches, name) {
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
				vals = append(vals, args[i])
			}
		}
		var v any = true
		switch len(vals) {
		case 0:
		case 1:
			s, err := parseScalar(vals[0])
			if _, list := s.([]any); err != nil || list && name == "moe-layer-freq" {
				s = vals[0] // a Python list expression Megatron evaluates itself (megatronMoEPattern)
			}
			v = s
		default:
			l := make([]any, len(vals))
			for j, x := range vals {
				l[j] = x
			}
			v = l
		}
		if old, dup := t.leaves[name]; dup && fmt.Sprint(old.value) != fmt.Sprint(v) {
			return nil, &Error{File: file, Key: name, Msg: fmt.Sprintf("given twice: %s and %s", describe(old.value), describe(v)),
				Hint: "argparse keeps the last; give the flag once"}
		}
		t.leaves[name] = leaf{value: v}
	}
	return t, nil
}

func megatronPlan(t *tree, o Options) (*plan, error) {
	p := &plan{}
	tp, err := t.integer("tensor-model-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	experts, err := megatronModel(t, p, tp)
	if err != nil {
		return nil, err
	}
	if len(experts) > 0 {
		if err := megatronExpertRanks(t, o, tp); err != nil {
			return nil, err
		}
	}
	micro, err := t.integer("micro-batch-size", 0, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if micro == 0 {
		return nil, t.errorf("micro-batch-size", "Megatron requires it: --micro-batch-size 1", "missing")
	}
	p.set("batch", num(micro))
	seq, err := t.integer("seq-length", 0, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if o.Seq > 0 {
		seq = o.Seq
	} else if seq == 0 {
		return nil, t.errorf("seq-length", "Megatron requires it: --seq-length 4096", "missing")
	}
	p.set("seq", num(seq))
	megatron, err := megatronPrecision(t, p)
	if err != nil {
		return nil, err
	}
	noMask, err := t.boolean("no-create-attention-mask-in-dataloader", false)
	if err != nil {
		return nil, err
	}
	switch {
	case megatron && noMask: // most recipes' flag; Megatron's default loads it (sim/core/megatron_batch.go)
		p.set("dataloader_mask", boolean(false))
	case !megatron && !noMask:
		t.notModelled = append(t.notModelled, fmt.Sprintf("the dataloader's attention mask (create_attention_mask_in_dataloader, Megatron's default): a [%d, 1, %d, %d] bool on the first and last stages with each micro-batch, %.0f MiB",
			micro, seq, seq, float64(micro*seq*seq)/(1<<20)))
	}
	if err := megatronOptimizer(t, p, megatron); err != nil { // megatron_muon.go
		return nil, err
	}
	if err := megatronClip(t, p, "clip-grad"); err != nil {
		return nil, err
	}
	if err := megatronRecompute(t, p); err != nil {
		return nil, err
	}
	p.set("gpu", str(o.GPU))
	return p, megatronLayout(t, o, p, tp, micro, megatron, experts...)
}

// megatronModel writes mcore's GPT model from the flags; with
// --num-experts its MoE layers (megatron_moe.go), whose layout keywords
// it returns.
func megatronModel(t *tree, p *plan, tp int64) ([]string, error) {
	layers, err := t.integer("num-layers", 0, 1, 1<<16)
	if err != nil {
		return nil, err
	}
	hidden, err := t.integer("hidden-size", 0, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	heads, err := t.integer("num-attention-heads", 0, 1, 1<<16)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]int64{"hidden-size": hidden, "num-attention-heads": heads} {
		if v == 0 {
			return nil, t.errorf(k, "Megatron requires it", "missing")
		}
	}
	gqa, err := t.boolean("group-query-attention", false)
	if err != nil {
		return nil, err
	}
	groups, err := t.integer("num-query-groups", 1, 1, 1<<16)
	if err != nil {
		return nil, err
	}
	headDim, err := t.integer("kv-channels", hidden/heads, 1, 1<<16)
	if err != nil {
		return nil, err
	}
	swiglu, err := t.boolean("swiglu", false)
	if err != nil {
		return nil, err
	}
	ffnDefault := 4 * hidden
	if swiglu { // arguments.py: int((4 * hidden_size * 2 / 3) / 64) * 64
		ffnDefault = 4 * hidden * 2 / 3 / 64 * 64
	}
	ffn, err := t.integer("ffn-hidden-size", ffnDefault, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	noBias, err := t.boolean("disable-bias-linear", false)
	if err != nil {
		return nil, err
	}
	untie, err := t.boolean("untie-embeddings-and-output-weights", false)
	if err != nil {
		return nil, err
	}
	norm, err := t.str("normalization", "LayerNorm")
	if err != nil {
		return nil, err
	}
	normFn := map[string]string{"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}[norm]
	if normFn == "" {
		return nil, t.errorf("normalization", "LayerNorm or RMSNorm", "unknown normalization %s", quoteKey(norm))
	}
	position, err := t.str("position-embedding-type", "learned_absolute")
	if err != nil {
		return nil, err
	}
	if position != "learned_absolute" && position != "rope" {
		return nil, t.errorf("position-embedding-type", "learned_absolute or rope", "position embedding %s is not modelled", quoteKey(position))
	}
	maxPos, err := t.integer("max-position-embeddings", 0, 0, 1<<24)
	if err != nil {
		return nil, err
	}
	vocab, err := megatronVocab(t, tp)
	if err != nil {
		return nil, err
	}
	attn, err := megatronAttention(t)
	if err != nil {
		return nil, err
	}
	if err := megatronRunFlags(t, attn); err != nil {
		return nil, err
	}
	hiddenDrop, attnDrop, err := megatronDropout(t, attn)
	if err != nil {
		return nil, err
	}
	normCall := func(name string) string {
		if normFn == "rmsnorm" {
			return call("rmsnorm", num(hidden), kw("name", str(name)))
		}
		return call("layernorm", num(hidden), kw("name", str(name)))
	}
	attnArgs := []string{num(hidden), num(heads)}
	if gqa {
		attnArgs = append(attnArgs, kw("kv_heads", num(groups)))
	}
	if headDim != hidden/heads || hidden%heads != 0 {
		attnArgs = append(attnArgs, kw("head_dim", num(headDim)))
	}
	attnArgs = append(attnArgs, kw("qkv_bias", boolean(!noBias)), kw("out_bias", boolean(!noBias)), kw("impl", str(attn)),
		kw("rope", boolean(position == "rope")), kw("fused_qkv", "True"))
	if attnDrop > 0 {
		attnArgs = append(attnArgs, kw("dropout", formatFloat(attnDrop)))
	}
	attnArgs = append(attnArgs, kw("name", str("self_attention")))

	act := "gelu"
	if swiglu {
		act = "swiglu"
	}
	mlpArgs := []string{num(hidden), num(ffn), kw("act", str(act)), kw("bias", boolean(!noBias))}
	if hiddenDrop > 0 {
		mlpArgs = append(mlpArgs, kw("dropout", formatFloat(hiddenDrop)))
	}
	mlpArgs = append(mlpArgs, kw("name", str("mlp")))
	experts, err := megatronMoE(t, layers, hidden, ffn, tp, act, noBias)
	if err != nil {
		return nil, err
	}
	attnRes := "    residual(sequential(" + normCall("input_layernorm") + ", " + call("attention", attnArgs...) + ")),"
	stack := call("repeat", "gpt_layer", num(layers), kw("name", str("decoder.layers")))
	if experts == nil || slices.Contains(experts.pattern, false) {
		p.defs = append(p.defs, "gpt_layer = sequential(", attnRes,
			"    residual(sequential("+normCall("pre_mlp_layernorm")+", "+call("mlp", mlpArgs...)+")),", ")")
	}
	var parallel []string
	if experts != nil {
		// TransformerLayer's mlp_bda drops the MoE layer's output as the
		// MLP's (megatron/core/transformer/transformer_layer.py)
		moe := experts.block
		if hiddenDrop > 0 {
			moe += ", " + call("dropout", formatFloat(hiddenDrop), kw("name", str("mlp_bda")))
		}
		p.defs = append(p.defs, "moe_layer = sequential(", attnRes,
			"    residual(sequential("+normCall("pre_mlp_layernorm")+", "+moe+")),", ")")
		stack = call("repeat", megatronLayerList(experts.pattern), kw("name", str("decoder.layers")))
		parallel = experts.parallel
	}
	front := []string{call("embedding", num(vocab), num(hidden), kw("name", str("embedding")))}
	if position == "learned_absolute" {
		if maxPos == 0 {
			return nil, t.errorf("max-position-embeddings", "learned positions need it: --max-position-embeddings 4096", "missing")
		}
		front = append(front, call("add_embedding", num(maxPos), num(hidden), kw("max_seq", num(maxPos)), kw("name", str("position_embeddings"))))
	}
	if hiddenDrop > 0 { // LanguageModelEmbedding's embedding_dropout (config.hidden_dropout)
		front = append(front, call("dropout", formatFloat(hiddenDrop), kw("name", str("embedding_dropout"))))
	}
	p.model = call("model", append(append([]string{str("gpt")}, front...),
		stack, normCall("final_layernorm"), kw("vocab", num(vocab)), kw("tie_embeddings", boolean(!untie)))...)
	return parallel, nil
}

// megatronLayerList is the decoder's layers in the order the MoE pattern
// gives them, as runs: [gpt_layer] * 1 + [moe_layer] * 15.
func megatronLayerList(pattern []bool) string {
	var runs []string
	for i := 0; i < len(pattern); {
		j := i
		for j < len(pattern) && pattern[j] == pattern[i] {
			j++
		}
		name := "gpt_layer"
		if pattern[i] {
			name = "moe_layer"
		}
		runs = append(runs, fmt.Sprintf("[%s] * %d", name, j-i))
		i = j
	}
	return strings.Join(runs, " + ")
}

// megatronVocab is the padded vocabulary: --vocab-size, or GPT-2's BPE
// (--vocab-file), padded to a multiple of make-vocab-size-divisible-by x tp.
func megatronVocab(t *tree, tp int64) (int64, error) {
	size, err := t.integer("vocab-size", 0, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	if size == 0 {
		tok, err := t.str("tokenizer-type", "GPT2BPETokenizer")
		if err != nil {
			return 0, err
		}
		if _, ok := t.leaves["vocab-file"]; !ok || tok != "GPT2BPETokenizer" {
			return 0, t.errorf("vocab-size", "the tokenizer's vocabulary: --vocab-size N (memsh reads GPT-2's BPE from --vocab-file)", "missing")
		}
		size = 50257 // GPT-2's BPE vocabulary
	}
	div, err := t.integer("make-vocab-size-divisible-by", 128, 1, 1<<20)
	if err != nil {
		return 0, err
	}
	m := div * tp
	return (size + m - 1) / m * m, nil
}

// megatronAttention is the attention kernel: --attention-backend
// (auto, flash and fused keep no score matrix; unfused and local do).
// --transformer-impl (arguments.py at d98e8a6: transformer_engine by
// default) picks the layer spec: memsh replays Transformer Engine's
// (core/megatron_kernels.go, core/megatron_te.go); Megatron's local
// layers (its own unfused DotProductAttention and softmax, linears on
// PyTorch's matmuls) are listed as not modelled.
func megatronAttention(t *tree) (string, error) {
	switch impl, err := t.str("transformer-impl", "transformer_engine"); {
	case err != nil:
		return "", err
	case impl == "local":
		t.notModelled = append(t.notModelled, "transformer-impl local: Megatron's own layers (its unfused attention and softmax, linears on PyTorch's matmuls); memsh replays Transformer Engine's")
	case impl != "transformer_engine":
		return "", t.errorf("transformer-impl", "transformer_engine (the default) or local", "the %s layer spec is not modelled", quoteKey(impl))
	}
	flash, err := t.boolean("use-flash-attn", false)
	if err != nil {
		return "", err
	}
	backend, err := t.str("attention-backend", "auto")
	if err != nil {
		return "", err
	}
	switch {
	case flash:
		return "flash", nil
	case backend == "auto" || backend == "flash" || backend == "fused":
		return "flash", nil
	case backend == "unfused" || backend == "local":
		return "eager", nil
	}
	return "", t.errorf("attention-backend", "auto, flash, fused, unfused or local", "unknown backend %s", quoteKey(backend))
}

// megatronDropout is --hidden-dropout and --attention-dropout (0.1 each
// by default: TransformerConfig at d98e8a6, megatron/core/transformer/
// transformer_config.py lines 188-192). The hidden dropout is the
// bias-dropout-add after the attention and after the MLP
// (megatron/core/fusions/fused_bias_dropout.py: F.dropout saves a bool
// mask) and LanguageModelEmbedding's embedding_dropout; the attention
// dropout drops the probabilities, which flash and fused attention do in
// their kernel (no mask kept) and the unfused backend as
// torch.nn.Dropout on the [b, np, sq, sk] probabilities (Transformer
// Engine's UnfusedDotProductAttention). memsh's attention drops its
// probabilities and its output at one rate: the returned attention rate
// is the hidden one with a flash kernel, and with the unfused backend
// both rates when they agree; otherwise the attention's, the difference
// listed as not modelled.
func megatronDropout(t *tree, attn string) (hidden, attention float64, err error) {
	if hidden, err = t.probability("hidden-dropout", 0.1); err != nil {
		return 0, 0, err
	}
	if attention, err = t.probability("attention-dropout", 0.1); err != nil {
		return 0, 0, err
	}
	switch {
	case attn == "flash":
		return hidden, hidden, nil
	case attention != hidden:
		t.notModelled = append(t.notModelled, fmt.Sprintf("hidden-dropout %s after the attention (memsh drops the unfused attention's probabilities and its output at one rate, the attention-dropout %s)",
			formatFloat(hidden), formatFloat(attention)))
	}
	return hidden, attention, nil
}

// megatronRecompute is --recompute-granularity (or --recompute-activations,
// its selective shorthand) with --recompute-method and -num-layers.
func megatronRecompute(t *tree, p *plan) error {
	gran, err := t.str("recompute-granularity", "")
	if err != nil {
		return err
	}
	if sel, err := t.boolean("recompute-activations", false); err != nil {
		return err
	} else if sel && gran == "" {
		gran = "selective"
	}
	method, err := t.str("recompute-method", "")
	if err != nil {
		return err
	}
	layers, err := t.integer("recompute-num-layers", 0, 1, 1<<16)
	if err != nil {
		return err
	}
	// TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py
	// at d98e8a6, lines 1919-1931): full recompute needs recompute_num_layers,
	// selective refuses it
	switch {
	case gran == "full" && layers == 0 && (method == "uniform" || method == "block"):
		return t.errorf("recompute-num-layers", "Megatron raises the same: --recompute-num-layers 1", "full recompute needs it")
	case gran == "selective" && layers > 0:
		return t.errorf("recompute-num-layers", "Megatron raises the same: drop it with selective recompute", "selective recompute takes no layer count")
	}
	// TransformerConfig's recompute_modules (transformer_config.py at d98e8a6,
	// lines 560-575, 1940-1941): ["core_attn"] by default, the selective
	// recompute memsh replays; the others (mlp, layernorm, moe_act, ...) not
	mods, _ := t.get("recompute-modules")
	var others []string
	switch x := mods.(type) {
	case string:
		if x != "core_attn" {
			others = append(others, x)
		}
	case []any:
		for _, m := range x {
			if s := fmt.Sprint(m); s != "core_attn" {
				others = append(others, s)
			}
		}
	}
	if gran == "selective" && len(others) > 0 {
		t.notModelled = append(t.notModelled, "recompute-modules: "+comment(strings.Join(others, ", "))+" recomputed too (memsh's selective recompute is core_attn's)")
	}
	switch {
	case gran == "":
	case gran == "selective":
		p.set("checkpoint", str("selective"))
	case gran == "full" && method == "uniform" && layers == 1:
		p.set("checkpoint", str("full"))
	case gran == "full" && method == "uniform":
		return t.errorf("recompute-num-layers", "memsh replays uniform recompute of one layer per chunk", "%d layers per recompute chunk are not modelled", layers)
	case gran == "full" && method == "block":
		return t.errorf("recompute-method", "memsh replays uniform recompute; write checkpoint(modules=...) in Starlark for a block", "block recompute is not modelled")
	case gran == "full":
		return t.errorf("recompute-method", "Megatron asserts the same: full recompute needs --recompute-method uniform or block", "missing")
	default:
		return t.errorf("recompute-granularity", "full or selective", "unknown granularity %s", quoteKey(gran))
	}
	return nil
}
