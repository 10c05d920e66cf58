package importers

// megatronLossParallel reads --cross-entropy-loss-fusion and
// --cross-entropy-fusion-impl (arguments.py at core_r0.13.0: "native" by
// default) into the loss_parallel value of Megatron's fused loss:
// "megatron_fused" (Megatron's own) or "te" (Transformer Engine's
// parallel_cross_entropy); "" without the fusion. Megatron computes its
// loss as the vocabulary-parallel cross-entropy at any tp
// (compute_language_model_loss, the tensor-parallel group of one rank at
// tp 1), and memsh lowers it so under precision="megatron" in a Megatron
// layout (core.Parallelism.Active): at tp 1 the value needs megatron
// (Megatron's runtime, megatronPrecision) and a layout the importer
// writes (layout: more than one GPU, or the distributed optimizer on
// one). Without them the fusion is listed as not modelled (memsh's plain
// cross-entropy).
func megatronLossParallel(t *tree, tp int64, layout, megatron bool) (string, error) {
	on, err := t.boolean("cross-entropy-loss-fusion", false)
	if err != nil || !on {
		t.get("cross-entropy-fusion-impl")
		return "", err
	}
	mode := "megatron_fused"
	switch impl, _ := t.get("cross-entropy-fusion-impl"); impl {
	case nil, "native":
	case "te":
		mode = "te"
	default:
		return "", t.errorf("cross-entropy-fusion-impl", "native (Megatron's own, the default) or te (Transformer Engine's)", "want native or te, got %s", describe(impl))
	}
	switch {
	case tp >= 2:
	case !layout:
		t.notModelled = append(t.notModelled, "cross-entropy-loss-fusion: Megatron's fused loss on one GPU without --use-distributed-optimizer (memsh lowers the plain cross-entropy without a Megatron layout)")
		return "", nil
	case !megatron:
		t.notModelled = append(t.notModelled, "cross-entropy-loss-fusion: Megatron's fused vocabulary-parallel loss at tp 1 in fp32 (memsh lowers the plain cross-entropy without --bf16 or --fp16)")
		return "", nil
	}
	return mode, nil
}
