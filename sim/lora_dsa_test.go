package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// PEFT's LoRA all-linear (r=4, alpha=8, fp32 adapters) on DeepSeek-V3.2
// adapts the sparse-attention indexer's wq_b, wk and weights_proj too;
// the indexer runs under torch.no_grad(), so those adapters require grad
// (PEFT counts them: 16,528 trainable on deepseek-v32-tiny.json) and get
// none (core.Builder.AdapterParam under NoGrad, replay's
// gradlessParams). deepseek-v32-tiny.json, 2 samples of 32 tokens,
// transformers 5.25.0, peft 0.21.2, PyTorch 2.15.0 on the CPU:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v32-tiny.json 2 2 32 {bfloat16,float16} sdpa nocache keepfp32 lora=all-linear
//
// parameters 290,752 B in bf16, 291,264 in fp16 (weights_proj kept in
// fp32); gradients 60,160 B, the 15,040 adapters outside the indexers
// in fp32.
func TestLoRADSAIndexerAsPEFT(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "deepseek-v32-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "5.25.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		precision                string
		params, grads, trainable int64
	}{
		{"bf16", 290752, 60160, 16528},
		{"fp16", 291264, 60160, 16528},
	} {
		p := tinyPlan(t, m)
		cpu, err := core.LookupRuntime("cpu")
		if err != nil {
			t.Fatal(err)
		}
		p.Runtime, p.Batch, p.Seq = cpu, 2, 32
		if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
			t.Fatal(err)
		}
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
		r := evalPlan(t, p)
		if r.States.Params != tc.params {
			t.Errorf("%s: parameters %d B, PEFT %d (%+d)", tc.precision, r.States.Params, tc.params, r.States.Params-tc.params)
		}
		if r.States.Grads != tc.grads {
			t.Errorf("%s: gradients %d B, PEFT %d (%+d)", tc.precision, r.States.Grads, tc.grads, r.States.Grads-tc.grads)
		}
		if r.TrainableParams != tc.trainable {
			t.Errorf("%s: %d trainable parameters, PEFT %d", tc.precision, r.TrainableParams, tc.trainable)
		}
		if want := 2 * tc.grads; r.States.Optimizer != want {
			t.Errorf("%s: %d bytes of AdamW state, want %d (two fp32 moments of the adapters that get a gradient)", tc.precision, r.States.Optimizer, want)
		}
	}
}
