package importers

// megatronPrecision is Megatron's mixed precision: 16-bit parameters,
// fp32 main gradients (unless --grad-reduce-in-bf16) and master weights.
// It reports whether the plan runs as Megatron-LM (core.Precision.Megatron).
func megatronPrecision(t *tree, p *plan) (bool, error) {
	bf16, err := t.boolean("bf16", false)
	if err != nil {
		return false, err
	}
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return false, err
	}
	gradBF16, err := t.boolean("grad-reduce-in-bf16", false)
	if err != nil {
		return false, err
	}
	t.get("accumulate-allreduce-grads-in-fp32")
	// The "megatron" policy (bf16 params, fp32 main grads and master
	// weights) runs the plan as Megatron-LM does: its kernels, batch and
	// buffers (core.Precision.Megatron); other dtypes change that policy.
	switch {
	case bf16 && fp16:
		return false, t.errorf("bf16", "Megatron refuses both: keep one", "and --fp16 are both given")
	case bf16 && gradBF16:
		p.set("precision", call("precision", str("megatron"), kw("grads", str("bf16"))))
	case bf16:
		p.set("precision", str("megatron"))
	case fp16:
		p.set("precision", call("precision", str("megatron"), kw("params", str("fp16")), kw("compute", str("fp16"))))
	default: // fp32 weights with no master copy: precision("megatron") cannot drop its master
		p.set("precision", str("fp32"))
		t.notModelled = append(t.notModelled, "Megatron-LM in fp32 (neither --bf16 nor --fp16): replayed with PyTorch's eager kernels, not Transformer Engine's fused ones, and without Megatron's batch")
		return false, megatronFP8(t, p)
	}
	return true, megatronFP8(t, p)
}
