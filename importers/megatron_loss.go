package importers

// megatronLossParallel reads --cross-entropy-loss-fusion and
// --cross-entropy-fusion-impl (arguments.py at core_r0.13.0: "native" by
// default) into the loss_parallel value of Megatron's fused loss with
// tensor parallelism, where memsh lowers Megatron's vocabulary-parallel
// loss: "megatron_fused" (Megatron's own) or "te" (Transformer Engine's
// parallel_cross_entropy); "" without the fusion. The fusion at tp 1
// (memsh's plain cross-entropy there) is listed as not modelled.
func megatronLossParallel(t *tree, tp int64) (string, error) {
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
	if tp < 2 {
		t.notModelled = append(t.notModelled, "cross-entropy-loss-fusion: Megatron's fused vocabulary-parallel loss at tp 1 (memsh lowers the plain cross-entropy without tensor parallelism)")
		return "", nil
	}
	return mode, nil
}
