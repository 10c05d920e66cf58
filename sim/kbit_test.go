package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// kbitPlan is QLoRA on a small Llama (hidden 512, 2 layers, 8 heads of
// 64, 2 KV heads, vocabulary 32,000, untied head): nf4 base weights, LoRA
// rank 16 on q and v, 2 x 1,024 tokens, loaded in bf16.
func kbitPlan(kbit bool, ckpt string) *core.Plan {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", ckpt, "A100-80GB")
	p.Quant = "nf4"
	p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"q", "v"}}
	p.KbitPrep = kbit
	return p
}

// TestKbitPreparationCasts counts prepare_model_for_kbit_training's casts
// by hand (sim/core/kbit.go). The parameters left unquantized are the
// embedding and the head (32,000 x 512 each: 32,768,000) and the norms
// (two per layer and the final one, 512 each: 2,560); each goes from 2
// bytes to 4: 32,770,560 x 2 = 65,541,120 bytes more parameters. The
// adapters PEFT adds (per layer: q's A 16 x 512 and B 512 x 16, 16,384;
// v's A 16 x 512 and B 128 x 16, 10,240; 53,248 in all) are fp32 with or
// without the preparation (get_peft_model's autocast_adapter_dtype=True),
// and so are their gradients: 53,248 x 4 = 212,992 bytes; with
// autocast_adapter_dtype=False and no preparation they stay bf16
// (106,496 bytes of gradients, 106,496 fewer of parameters).
// tools/oracle/peft_kbit.py measured the prepared model (peft 0.21.2,
// transformers 5.24.0, torch 2.15, CPU, the base left unquantized):
// every parameter fp32, 53,248 of them trainable, their gradients fp32;
// tools/oracle/peft_adapter_dtype.py the adapters' dtype both ways.
func TestKbitPreparationCasts(t *testing.T) {
	plain := evalPlan(t, kbitPlan(false, "full"))
	prep := evalPlan(t, kbitPlan(true, "full"))
	base := kbitPlan(false, "full")
	base.LoRA.BaseDType = true
	bf16 := evalPlan(t, base)
	if d := prep.States.Params - plain.States.Params; d != 65_541_120 {
		t.Errorf("the casts add %d bytes of parameters, want 65,541,120", d)
	}
	if d := plain.States.Params - bf16.States.Params; d != 106_496 {
		t.Errorf("fp32 adapters add %d bytes of parameters, want 106,496", d)
	}
	if prep.TrainableParams != 53_248 {
		t.Errorf("%d trainable parameters, peft_kbit.py measured 53,248", prep.TrainableParams)
	}
	if bf16.States.Grads != 106_496 || plain.States.Grads != 212_992 || prep.States.Grads != 212_992 {
		t.Errorf("adapter gradients %d (bf16 adapters), %d (PEFT's default) and %d (prepared), want 106,496, 212,992 and 212,992",
			bf16.States.Grads, plain.States.Grads, prep.States.Grads)
	}
}

// TestKbitPreparationCheckpoint: with no checkpointing asked for, the
// preparation checkpoints every layer, reentrant (use_gradient_
// checkpointing=True, the empty kwargs leaving use_reentrant to torch's
// True: peft_kbit.py sees torch's warning of that fallback): the same step as checkpoint("full", reentrant=True) prepared.
// Without the preparation, reentrant checkpoints over a frozen embedding
// record no graph (no input requires grad) and the adapters inside get no
// gradient; the preparation's enable_input_require_grads makes the
// embedding's output require grad, so every adapter trains, and the
// backward makes that output's gradient: 2,048 x 512 fp32, 4,194,304
// bytes, at the first layer's residual backward.
func TestKbitPreparationCheckpoint(t *testing.T) {
	none := evalPlan(t, kbitPlan(true, "none"))
	reentrant := kbitPlan(true, "full")
	reentrant.Checkpoint.Reentrant = true
	full := evalPlan(t, reentrant)
	if none.PeakAllocated != full.PeakAllocated {
		t.Errorf("prepared without checkpoint peaks at %d, with full reentrant checkpoints at %d: want the same", none.PeakAllocated, full.PeakAllocated)
	}
	bare := kbitPlan(false, "full")
	bare.Checkpoint.Reentrant = true
	if g := evalPlan(t, bare).States.Grads; g != 0 {
		t.Errorf("reentrant checkpoints over a frozen embedding: adapter gradients %d bytes, want none", g)
	}
	if full.States.Grads != 212_992 {
		t.Errorf("prepared: adapter gradients %d bytes, want 212,992", full.States.Grads)
	}
	r, err := Evaluate(reentrant, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range r.Trace.SteadyEvents() {
		if e.Action == "alloc" && e.Phase == replay.PhaseBackward && e.Tensor == "grad of embed_tokens.out" {
			got = append(got, e.Size)
		}
	}
	if !slices.Equal(got, []int64{4_194_304}) {
		t.Errorf("the embedding output's gradient: %v, want one of 4,194,304 bytes", got)
	}
}

// TestKbitPreparationRefused: the preparation needs a bitsandbytes model.
func TestKbitPreparationRefused(t *testing.T) {
	for _, quant := range []string{"", "torchao-nf4"} {
		p := kbitPlan(true, "full")
		p.Quant = quant
		if _, err := Evaluate(p, core.Options{}); err == nil {
			t.Errorf("quant %q: peft_kbit accepted", quant)
		}
	}
}
