package importers

// megatronRunFlags reads the pretrain_gpt.py flags that shape how the
// run executes rather than the model or the layout (Megatron-LM at
// d98e8a64dd, megatron/training/arguments.py; every one is set by most
// of Megatron-LM's own functional tests):
//
//   - --distributed-backend: NCCL, the default; gloo (collectives on the
//     host) is refused, memsh pricing NCCL's.
//   - --deterministic-mode: deterministic kernels (Transformer Engine's
//     deterministic attention backward under
//     NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, no atomics, a fixed NCCL
//     algorithm): slower, not modelled, memsh pricing the default ones.
//   - --log-params-norm and --log-num-zeros-in-grad: each logged step
//     computes the parameters' norm (calc_params_l2_norm: fp32 copies
//     where a parameter has no main_param) or counts the zero gradients
//     (count_zeros_fp32) after the backward: below the peak, not timed.
//   - --no-bias-gelu-fusion and --no-rope-fusion: the MLP's bias and
//     GeLU, and the rotary embedding, as separate PyTorch ops (memsh
//     replays the fused kernels), --check-weight-hash-across-dp-replicas-
//     interval (a hash of every weight all-gathered over the data-parallel
//     ranks every N steps) and --use-tp-pp-dp-mapping (ranks ordered tp,
//     pp, dp: memsh keeps tensor parallelism inside a node): not modelled.
//   - --attention-softmax-in-fp32 and --apply-query-key-layer-scaling
//     change the unfused attention's softmax (its dtype and its scale);
//     flash and fused attention compute the softmax in fp32 in their
//     kernel whatever they say, so they are of no effect there and not
//     modelled with the unfused backend (attn "eager").
func megatronRunFlags(t *tree, attn string) error {
	backend, err := t.str("distributed-backend", "nccl")
	if err != nil {
		return err
	}
	if backend != "nccl" {
		return t.errorf("distributed-backend", "nccl (the default): memsh prices NCCL's collectives",
			"the %s backend is not modelled", quoteKey(backend))
	}
	t.notModelledIf("deterministic-mode", "deterministic kernels (Transformer Engine's attention backward, a fixed NCCL algorithm): memsh prices the default ones")
	t.notModelledIf("log-params-norm", "the parameters' norm each logged step, after the step (below the peak): not timed")
	t.notModelledIf("log-num-zeros-in-grad", "a count of the zero gradients each step, after the backward (below the peak): not timed")
	t.notModelledIf("no-bias-gelu-fusion", "the MLP's bias and GeLU as separate PyTorch ops (memsh replays the fused bias_gelu)")
	t.notModelledIf("no-rope-fusion", "the rotary embedding as separate PyTorch ops (memsh replays the fused kernel)")
	t.notModelledIf("check-weight-hash-across-dp-replicas-interval", "every weight hashed and the hashes all-gathered over the data-parallel ranks every N steps: not timed")
	t.notModelledIf("use-tp-pp-dp-mapping", "ranks ordered tp, pp, dp (memsh keeps tensor parallelism inside a node)")
	for _, key := range []string{"attention-softmax-in-fp32", "apply-query-key-layer-scaling"} {
		if attn == "eager" {
			t.notModelledIf(key, "the unfused attention's softmax in fp32 (memsh keeps its probabilities in the compute dtype)")
		} else if _, err := t.boolean(key, false); err != nil {
			return err
		}
	}
	return nil
}
