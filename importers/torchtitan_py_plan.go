package importers

import (
	"fmt"
	"slices"
)

// The Python configs' settings that the TOML generation did not have, or
// had elsewhere: the model's registry options and converters, the
// activation checkpointing policy classes, the loss classes and the
// runtime's CUDA graphs (pytorch/torchtitan at b5bcd76c6).

// torchtitanPyModelOptions reads model_registry's attention backend; it
// returns the model with the attention torchtitan runs (model is the zoo model's expression, hf
// whether it is hf_config's).
//
// get_attention_config (models/common/config_utils.py at b5bcd76c6):
// language models always mask block_causal (causal within each packed
// document); "flex" (model_registry's default: models/llama3/__init__.py)
// is compiled FlexAttention (memsh's attention impl "flex",
// sim/nn/flex_attention.go), "flex_flash" the same with
// kernel_options={"BACKEND": "FLASH"} (flash-attn's CuTe kernel, Hopper
// and Blackwell only), "varlen" torch.nn.attention.varlen's varlen_attn,
// flash-attn's varlen kernel (memsh's "flash"); "sdpa" raises.
func torchtitanPyModelOptions(t *tree, model string, hf bool) (string, error) {
	const key = "model_spec.attn_backend"
	name, _ := t.str("model_spec.name", "")
	attn, err := t.str(key, pyRegistryDefault(name, "attn_backend"))
	if err != nil {
		return "", err
	}
	impl, why := "flex", "memsh prices its kernel as flash-attn's over one causal row a sequence, train(doc_tokens=) per document, and leaves out its BlockMask's int32 tensors"
	if hf { // hf_config's attn takes transformers' kernels
		why = "memsh replays it as flash-attn's kernel: the same saved set (sim/flex_attention_test.go), flash-attn's backward workspaces"
	}
	switch attn {
	case "flex":
		which := "flex, model_registry's default ("
		if pyRegistryDefault(name, "attn_backend") != "flex" {
			which = "flex ("
		}
		t.notModelled = append(t.notModelled, key+": "+which+why+")")
	case "flex_flash":
		t.notModelled = append(t.notModelled, key+": flex_flash, FlexAttention's FLASH backend (flash-attn's CuTe kernel, replayed with the Triton backend's workspaces; "+why+")")
	case "varlen":
		impl = "flash"
	case "sdpa":
		return "", t.errorf(key, `torchtitan raises the same ValueError (get_attention_config): set attn_backend="flex" (model_registry's default), "flex_flash" or "varlen"`,
			"sdpa is no longer supported for language models; positions are always available so use flex, flex_flash, or varlen.")
	case pyDictLost:
		t.notModelled = append(t.notModelled, key+": "+pyDictLost+" (memsh replays model_registry's default, flex: "+why+")")
	default:
		return "", t.errorf(key, `torchtitan's backends are "flex", "flex_flash" and "varlen"`, "Unknown backend: %s", quoteKey(attn))
	}
	if hf {
		impl = "flash"
	}
	return model[:len(model)-1] + ", " + kw("attn", str(impl)) + ")", nil
}

// torchtitanPyTPGemm reads model_registry's TP GEMM backend.
func torchtitanPyTPGemm(t *tree) error {
	gemm, err := t.str("model_spec.tp_gemm_backend", "default")
	if err != nil {
		return err
	}
	if gemm != "default" {
		t.notModelled = append(t.notModelled, "model_spec.tp_gemm_backend: "+comment(gemm)+" (the TP collectives folded into their GEMMs)")
	}
	return nil
}

// torchtitanPyCheckpoint maps the activation checkpointing policy: the
// class of Trainer.Config.activation_checkpoint (SelectiveAC.Config by
// default), or None. SelectiveAC at b5bcd76c6 is the per-op policy
// (memsh's "op": compute-intensive ops, attention and reduce-scatter
// saved, every second matmul recomputed); FullAC recomputes each block;
// MemoryBudgetAC is the compiled model's budget, which Trainer.Config
// refuses without the model compiled.
func torchtitanPyCheckpoint(t *tree, p *plan, compiledModel bool) error {
	const key = "activation_checkpoint"
	class, err := t.str(key, "SelectiveAC.Config")
	if err != nil {
		return err
	}
	// FullAC and SelectiveAC wrap each block with early_stop=False
	// (distributed/activation_checkpoint.py at b5bcd76c6): the recompute
	// runs the block's whole forward, where the model is not compiled.
	whole := !compiledModel
	switch class {
	case "None":
	case "FullAC.Config":
		p.set("checkpoint", checkpointNamed(whole, "mode", "full"))
	case "SelectiveAC.Config":
		p.set("checkpoint", checkpointNamed(whole, "policy", "op"))
		if v, set := t.get(key + ".force_recompute_mm_shapes_by_fqns"); set {
			if l, _ := v.([]any); len(l) > 0 && !(len(l) == 1 && l[0] == "moe.router.gate") {
				t.notModelled = append(t.notModelled, key+".force_recompute_mm_shapes_by_fqns: the matmuls of those shapes recomputed (memsh's per-op policy recomputes every second one)")
			}
		}
	case "MemoryBudgetAC.Config":
		if !compiledModel {
			return t.errorf(key, "torchtitan raises the same: set compile.enable = True with \"model\" in compile.components",
				"memory budget activation checkpointing needs the model compiled")
		}
		budget, _ := t.get(key + ".memory_budget")
		f := 0.5
		if budget != nil {
			x, ok := toFloat(budget)
			if !ok || x < 0 || x > 1 {
				return t.errorf(key+".memory_budget", "a fraction in [0, 1]: 0 recomputes all, 1 saves all", "want a fraction, got %s", describe(budget))
			}
			f = x
		}
		p.set("checkpoint", call("checkpoint", kw("budget", formatFloat(f))))
	default:
		return t.errorf(key, "torchtitan's policies are FullAC.Config, SelectiveAC.Config, MemoryBudgetAC.Config and None", "unknown policy %s", quoteKey(class))
	}
	return nil
}

// torchtitanPyConverters reads model_registry's converters: Float8's
// (components/quantization/float8.py at b5bcd76c6: torchao's recipes
// rowwise, the default, and rowwise_with_gw_hp; filter_fqns names the
// linears left in bf16, lm_head the output head) as memsh's float8, the
// others listed not modelled. tp: the job runs tensor parallelism.
func torchtitanPyConverters(t *tree, p *plan, tp bool) error {
	const key = "model_spec.converters"
	v, _ := t.get(key)
	classes, _ := v.([]any)
	for i, c := range classes {
		ck := fmt.Sprintf("%s[%d]", key, i)
		for _, k := range t.keys() { // the converter's own fields, read below or of no effect
			if len(k) > len(ck) && k[:len(ck)+1] == ck+"." {
				t.get(k)
			}
		}
		switch c {
		case "Float8LinearConverter.Config":
			if err := torchtitanPyFloat8(t, p, ck, tp); err != nil {
				return err
			}
		case "MXFP8LinearConverter.Config":
			t.notModelled = append(t.notModelled, ck+": MXFP8 linears (torchao's MX formats)")
		case "NVFP4LinearConverter.Config":
			t.notModelled = append(t.notModelled, ck+": NVFP4 linears")
		default:
			t.notModelled = append(t.notModelled, ck+": "+comment(fmt.Sprint(c)))
		}
	}
	return nil
}

func torchtitanPyFloat8(t *tree, p *plan, ck string, tp bool) error {
	recipe, err := t.str(ck+".recipe_name", "rowwise")
	if err != nil {
		return err
	}
	switch {
	case recipe != "rowwise" && recipe != "rowwise_with_gw_hp":
		return t.errorf(ck+".recipe_name", "rowwise or rowwise_with_gw_hp", "unknown recipe %s", quoteKey(recipe))
	case recipe == "rowwise_with_gw_hp":
		t.notModelled = append(t.notModelled, ck+".recipe_name: rowwise_with_gw_hp (its weight gradient GEMM in bf16)")
		return nil
	case tp:
		// as the TOML generation's: a rowwise recipe under TP gathers in bf16
		// and casts in the Float8Linear
		t.notModelled = append(t.notModelled, ck+".recipe_name: rowwise with tensor parallelism (the input gathered in bf16, then cast rowwise)")
		return nil
	}
	if on, _ := t.boolean(ck+".emulate", false); on {
		t.notModelled = append(t.notModelled, ck+".emulate: float8 emulated in high precision (matmuls upcast)")
		return nil
	}
	p.set("float8", str("rowwise"))
	fqns, err := t.strs(ck + ".filter_fqns")
	if err != nil {
		return err
	}
	if !slices.Contains(fqns, "lm_head") {
		t.notModelled = append(t.notModelled, ck+".filter_fqns without lm_head: the output head converted too (memsh keeps it in bf16)")
	}
	for _, f := range fqns {
		switch f {
		case "lm_head":
		case "auto_filter_small_kn":
			p.set("float8_auto_filter", "True")
		default:
			t.notModelled = append(t.notModelled, ck+".filter_fqns: "+comment(f)+" (memsh converts every linear but the output head)")
		}
	}
	// SelectiveAC's save list has aten.max (activation_checkpoint.py at
	// b5bcd76c6) but not aten.abs, which memsh's "op" default keeps: it
	// only matters to float8's casts.
	for i, a := range p.train {
		if a.key == "checkpoint" && a.expr == str("op") {
			p.train[i].expr = call("checkpoint", kw("policy", str("op")), kw("save", strList([]string{"mm", "attention", "reduce_scatter", "max"})))
		}
	}
	return nil
}

// torchtitanPyRuntime reads the trainer's runtime settings: the loss
// class, CUDA graphs, FSDP's symmetric memory, validation, context
// parallelism and what Trainer.Config refuses.
func torchtitanPyRuntime(t *tree, p *plan, l torchtitanLayout) error {
	if on, err := t.boolean("debug.batch_invariant", false); err != nil || on {
		if err != nil {
			return err
		}
		return t.errorf("debug.batch_invariant", "torchtitan raises the same: drop it", "batch-invariant mode is not supported in pre-training")
	}
	loss, err := t.str("loss", "BaseLoss.Config")
	if err != nil {
		return err
	}
	switch loss {
	case "BaseLoss.Config":
		return t.errorf("loss", "set loss=CrossEntropyLoss.Config(...) or ChunkedLossWrapper.Config(...), as torchtitan's configs do",
			"the config sets no loss (Trainer.Config's default, BaseLoss.Config, builds none)")
	case "CrossEntropyLoss.Config":
	case "ChunkedLossWrapper.Config":
		chunks, err := t.integer("loss.num_chunks", 8, 1, 1<<20)
		if err != nil {
			return err
		}
		inner, _ := t.str("loss.loss_fn", "CrossEntropyLoss.Config")
		// components/loss.py at b5bcd76c6: the hidden states detached and
		// split in num_chunks; per chunk lm_head, the loss and its
		// backward run inside the forward, the chunk's gradient copied
		// into an fp32 buffer of the head's input, which the decoder's
		// backward then takes: memsh's loss_chunks=("torchtitan", n)
		// (sim/core/titan_loss.go), with CrossEntropyLoss inside; under
		// tp on the replicated hidden states and a vocabulary shard with
		// the vocabulary-parallel loss, on the last pipeline stage under
		// pp (trainer.py l.498-523). The Python configs have no switch
		// to turn the vocabulary-parallel loss off: tp > 1 runs it.
		if inner != "CrossEntropyLoss.Config" {
			t.notModelled = append(t.notModelled, fmt.Sprintf("loss: ChunkedLossWrapper, %d chunks of %s (memsh models it around CrossEntropyLoss only; the plan replays the whole logits at once)",
				chunks, inner))
		} else {
			p.set("loss_chunks", "("+str("torchtitan")+", "+num(chunks)+")")
		}
	default:
		t.notModelled = append(t.notModelled, "loss: "+comment(loss)+" (memsh replays a language model's cross-entropy)")
	}
	graphs, err := t.boolean("training.disable_cuda_graphs", false)
	if err != nil {
		return err
	}
	if !graphs {
		// trainer.py at b5bcd76c6: Trainer.Config refuses CUDA graphs with
		// pipelining (_validate_cuda_graphs)
		if l.pp > 1 {
			return t.errorf("training.disable_cuda_graphs", "torchtitan raises the same: set config.training.disable_cuda_graphs = True",
				"CUDA graphs (on by default) do not support pipeline parallelism")
		}
		p.set("zero_grad", str("zeros")) // train_step's zero_grad(set_to_none=disable_cuda_graphs)
		t.notModelled = append(t.notModelled, "training.disable_cuda_graphs: False, the default: forward and backward captured as a CUDA graph "+
			"(distributed/cudagraph.py), its memory pool kept between steps (memsh replays the eager step, with the gradients zeroed, not freed)")
	}
	if v, _ := t.get("compile.backend"); v != nil && v != "inductor" {
		t.notModelled = append(t.notModelled, "compile.backend: "+comment(fmt.Sprint(v))+" (memsh replays inductor's fused kernels)")
	}
	t.notModelledIf("parallelism.enable_fsdp_symm_mem", "FSDP2's collectives in symmetric memory")
	t.notModelledIf("validator.enable", "the validation loop's forward passes")
	if l.cp > 1 {
		t.notModelled = append(t.notModelled, "parallelism.context_parallel_degree: the attention of distributed/context_parallel/api.py (memsh replays torch's all-gather context parallelism, the TOML generation's default)")
	}
	return nil
}
