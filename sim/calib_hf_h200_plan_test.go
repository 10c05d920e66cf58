package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// hfH200Plan is the plan of one of cuda_hf.py's runs on the H200
// (TestHFH200Calibration says how each variant is trained): the model
// from its config.to_dict() (sim/testdata/cuda_h200/configs) as
// hf_config builds it under transformers 5.17.0 with sdpa attention.
// variant is bf16, amp, ckpt, lora, lora_bf16ad or loop.
func hfH200Plan(t *testing.T, config string, batch, seq int64, variant string) *core.Plan {
	t.Helper()
	dev, err := hw.LookupDevice("H200")
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	bf16, _ := core.LookupPrecision("bf16")
	amp, _ := core.LookupPrecision("bf16-mixed")
	ckpt := core.Checkpoint{Mode: "full", InputGrad: true}
	experts := ""
	if variant == "loop" {
		experts = "eager"
	}
	m := hfH200Model(t, config, experts)
	p := &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1, Members: 1, Precision: bf16,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Device: dev, Phase: core.Train, Runtime: rt, KeepLogits: true}
	switch variant {
	case "amp":
		p.Precision = amp
	case "ckpt":
		p.Checkpoint = ckpt
	case "lora", "lora_bf16ad":
		p.Checkpoint = ckpt
		p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}, BaseDType: variant == "lora_bf16ad"}
	}
	return p
}

// hfH200Model is the model of config (sim/testdata/cuda_h200/configs,
// its config.to_dict()) as hf_config builds it under transformers 5.17.0
// with sdpa attention and the experts experts ("": the default).
func hfH200Model(t testing.TB, config, experts string) *core.Model {
	t.Helper()
	data, err := os.ReadFile("testdata/cuda_h200/configs/" + config + ".json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: "5.17.0", Experts: experts})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
