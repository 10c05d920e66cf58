package builtins

import (
	"testing"

	"go.starlark.net/starlark"
)

// TestValuesPrintAsTheirCall checks that the settings' values print as a
// call that builds them again (what reports, advice, sweeps and the REPL
// print can be pasted back into a script): for each expression, str() of
// its value evaluates to an equal value that prints the same (equal by
// their settings: optimizers, precisions, LoRA and offload settings; by
// their figures: GPUs; by the call they print: checkpoint policies). Every
// keyword of each constructor is set away from its default in some row
// (parallel()'s keywords: builtins/plans TestParallelStringIsTheCall).
func TestValuesPrintAsTheirCall(t *testing.T) {
	eval := starEval(t, "")
	for _, expr := range []string{
		`adamw()`, `adamw(impl="fused")`, `adamw(fused=True)`, `adamw(impl="for-loop")`, `adamw(in_backward=True)`,
		`adam()`, `adam(impl="fused", in_backward=True)`,
		`adamw8bit()`, `adamw8bit(in_backward=True)`, `paged_adamw(in_backward=True)`, `paged_adamw8bit(in_backward=True)`,
		`adafactor(in_backward=True)`, `lion(in_backward=True)`, `sgd()`, `muon()`, `muon(momentum=0.9, nesterov=False, ns_steps=6, impl="fused")`, `muon(newton_schulz="reference")`, `sgd(momentum=0.9, in_backward=True)`, `sparse_adam(in_backward=True)`,
		`checkpoint("full")`, `checkpoint("selective")`, `checkpoint(every=2)`, `checkpoint(modules=["model.layers.0"])`,
		`checkpoint(budget=0.5)`, `checkpoint(budget=40 * GiB)`, `checkpoint("full", reentrant=True)`,
		`checkpoint("full", reentrant=True, input_requires_grad=True)`, `checkpoint("full", early_stop=False)`,
		`checkpoint(policy="op")`, `checkpoint(policy="op", save=["mm", "attention"])`, `checkpoint(policy="layer", every=3)`,
		`lora()`, `lora(rank=16, alpha=32, targets=["all-linear"], dropout=0.1)`, `lora(autocast_adapter_dtype=False)`,
		`lora(targets=[], target_parameters=["mlp.experts.gate_up_proj"])`, `lora(target_pattern=".*proj")`,
		`offload(optimizer="cpu")`, `offload(params="cpu", optimizer="nvme")`, `offload(activations="cpu", streams=False)`,
		`cluster(nodes=2)`, `cluster(nodes=4, gpus_per_node=4, intra=300, inter=50, host=512 * GiB, nvme_read=6, nvme_write=3)`,
		`gpu("H100")`, `gpu("A100-40GB")`,
		`gpu("H100", memory=94 * GiB, bf16_tflops=800, fp32_tflops=60, fp8_tflops=1600, hbm_gbps=3900, link_gbps=400, pcie_gbps=60, context=600 * MiB, smi_memory=95 * GiB)`,
		`precision("bf16-mixed")`, `precision("fp16-mixed")`, `precision("bf16")`,
		`precision(params="fp32", compute="bf16", grads="fp32", master="fp32", optimizer_states="bf16", autocast=True, norms="fp32")`,
		`dpo()`, `dpo(reference="precomputed")`, `dpo(trl="1.8")`, `dpo(trainer="torchtune")`,
		`kto()`, `kto(loss="apo_zero_unpaired")`, `kto(reference="precomputed", trl="1.8")`,
		`grpo()`, `grpo(completion=1024, beta=0.04)`, `grpo(beta=1)`, `grpo(vllm="colocate")`, `grpo(vllm="colocate", vllm_memory=0.5, sleep=True)`,
		`grpo(vllm="server", trl="1.15")`, `grpo(steps_per_generation=4)`, `grpo(generation_batch_size=64, ds3_gather=False)`,
	} {
		t.Run(expr, func(t *testing.T) {
			first, err := eval(expr)
			if err != nil {
				t.Fatalf("the sample does not evaluate: %v", err)
			}
			text := first.String()
			again, err := eval(text)
			if err != nil {
				t.Fatalf("%s prints %s, which does not evaluate: %v", expr, text, err)
			}
			if again.String() != text {
				t.Errorf("%s prints %s, which prints %s", expr, text, again.String())
			}
			if eq, err := starlark.Equal(first, again); err != nil || !eq {
				t.Errorf("%s prints %s, which builds another value (%v)", expr, text, err)
			}
		})
	}
}

// TestSettingsCompare checks == and != of the settings' values, as a
// script, a dict key or `in` compares them: layouts holding a list (any
// layout: core.Parallelism has list fields) compared by Go's == panicked
// ("comparing uncomparable type plans.Parallel"), LoRA and offload
// settings compared by identity (lora() == lora() was False).
func TestSettingsCompare(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "parallel(dp = 2) == parallel(dp = 2, tp = 1)", want: "True"},
		{expr: "parallel(dp = 2) != parallel(dp = 4)", want: "True"},
		{expr: `parallel(dp = 4, fsdp = True, fsdp_units = ["a"]) == parallel(dp = 4, fsdp = True, fsdp_units = ["a"])`, want: "True"},
		{expr: `parallel(dp = 4, fsdp = True, fsdp_units = ["a"]) == parallel(dp = 4, fsdp = True, fsdp_units = ["b"])`, want: "False"},
		{expr: "{parallel(dp = 2): 1}[parallel(dp = 2)]", want: "1"},
		{expr: "parallel(pp = 2, stage_layers = [3, 5]) in [parallel(dp = 2), parallel(pp = 2, stage_layers = [3, 5])]", want: "True"},
		{expr: "parallel(dp = 2) < parallel(dp = 4)", err: "< not supported for layouts"},
		{expr: "lora() == lora(rank = 8, alpha = 16)", want: "True"},
		{expr: "lora() == lora(rank = 4)", want: "False"},
		{expr: `lora(targets = ["all-linear"]) != lora()`, want: "True"},
		{expr: "{lora(): 1}[lora()]", want: "1"},
		{expr: `offload(optimizer = "cpu") == offload(optimizer = "cpu")`, want: "True"},
		{expr: `offload(optimizer = "cpu") == offload(params = "cpu")`, want: "False"},
		{expr: `offload(activations = "cpu") == offload(activations = "cpu", streams = False)`, want: "False"},
		// a LoRA configuration's attributes are its keywords: targets is None
		// where target_pattern stands for it (lora() refuses both)
		{expr: `lora(target_pattern = ".*proj").targets`, want: "None"},
		{expr: `[lora(**{k: getattr(l, k) for k in dir(l)}) == l for l in [lora(rank = 4, targets = ["all-linear"]), lora(target_pattern = ".*proj", dropout = 0.1)]]`, want: "[True, True]"},
	})
}
