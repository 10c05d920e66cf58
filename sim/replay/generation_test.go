package replay

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// grpoGenPlan is a GRPO step of a tiny two-layer decoder (4 heads of 64,
// 2 key-value heads: 128 numbers a token in each cache tensor) on one
// H100, bf16, whose generation batch is batch x accum rows.
func grpoGenPlan(batch, seq, accum, completion int64) *core.Plan {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &nn.Attention{Name: "self_attn", Dim: 256, Heads: 4, KVHeads: 2, Impl: "sdpa", Causal: true}},
		&core.Residual{Layer: &nn.MLP{Dim: 256, Hidden: 1024, Act: "swiglu"}},
	}}
	m := &core.Model{Name: "tiny", Vocab: 1024, Loss: "cross_entropy", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 1024, Dim: 256},
		&core.Repeat{Name: "layers", Layer: block, N: 2},
	}}
	prec, _ := core.LookupPrecision("bf16")
	dev, _ := hw.LookupDevice("H100-80GB")
	rt, _ := core.LookupRuntime("cuda")
	pr := &core.Preference{Trainer: core.TrainerTRL, Loss: core.LossGRPO, TRL: core.TRLFusedHead, Reference: core.RefNone,
		GRPOConfig: core.GRPOConfig{Completion: completion}}
	return &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: accum, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "full"}, Device: dev, Runtime: rt, Preference: pr}
}

// round512 is n rounded up as the caching allocator rounds a request.
func round512(n int64) int64 { return (n + 511) / 512 * 512 }

// The generation phase's own peak, above what was live when it began, is
// the prompts' input_ids and the arithmetic of transformers' _sample at its last decode forward: the
// four cache tensors at seq - 1 tokens, the last layer's old values at seq
// - 2 while its new ones are made, and the last step's next_token_logits
// and probs ([G, V] fp32 each) that the locals keep; or, where the
// vocabulary outweighs the cache, the sampler's bf16 logits and three fp32
// [G, V] tensors (next_token_logits, probs and multinomial's draws) beside
// the caches.
func TestGenerationPassPeak(t *testing.T) {
	for _, c := range []struct {
		name                          string
		batch, seq, accum, completion int64
		phase                         Phase
		slack                         int64 // what the allocator may add: blocks over 1 MiB it does not split
	}{
		{"small tensors, the step's peak in the backward", 1, 512, 4, 448, PhaseBackward, 0},
		{"one row", 1, 512, 1, 448, PhaseBackward, 0},
		{"the generation batch's peak above the step's", 8, 512, 32, 448, PhaseGeneration, 6 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := grpoGenPlan(c.batch, c.seq, c.accum, c.completion)
			prog, err := plan.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(prog, plan, core.Options{Timeline: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Rep.PeakAt.Phase != c.phase {
				t.Errorf("peak in %s at %s, want %s", r.Rep.PeakAt.Phase, r.Rep.PeakAt.Op, c.phase)
			}
			var before, peak int64
			began := false
			for _, p := range r.Rep.Timeline {
				if p.Phase == PhaseGeneration {
					began = true
					peak = max(peak, p.Allocated)
				} else if !began {
					before = p.Allocated
				}
			}
			g, prompt := c.batch*c.accum, c.seq-c.completion
			row := g * 128 * 2                    // a cache tensor's bytes a token
			gv := round512(g * 1024 * 4)          // a [G, V] fp32 tensor
			caches := 4 * round512((c.seq-1)*row) // at seq - 1 tokens
			kept := round512(g * prompt * 8)      // the prompts' input_ids, which generate holds
			last := kept + caches - round512((c.seq-1)*row) + round512((c.seq-2)*row) + round512((c.seq-1)*row) + 2*gv
			sampler := kept + caches + round512(g*1024*2) + 3*gv
			if want := max(last, sampler); peak-before < want || peak-before > want+c.slack {
				t.Errorf("generation's peak %d B above the %d B before it, want %d to %d more (the last update %d, the sampler %d)", peak-before, before, want, c.slack, last, sampler)
			}
		})
	}
}

// Under ZeRO-3 the generation runs inside GatheredParameters: its phase
// rises above DDP's by the whole policy, each parameter in bf16
// (stage3_param_persistence_threshold 0: no module stays gathered), as
// deepspeed.zero.GatheredParameters(model.parameters()) holds it; under
// FSDP2 the phase is not replayed.
func TestGenerationPassGathersUnderZeRO3(t *testing.T) {
	rise := func(par core.Parallelism) (int64, bool) {
		plan := grpoGenPlan(8, 512, 32, 448)
		plan.Parallel = par
		prog, err := plan.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(prog, plan, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var before, peak int64
		began := false
		for _, p := range r.Rep.Timeline {
			if p.Phase == PhaseGeneration {
				began = true
				peak = max(peak, p.Allocated)
			} else if !began {
				before = p.Allocated
			}
		}
		return peak - before, began
	}
	ddp, _ := rise(core.Parallelism{DP: 2})
	zero3, _ := rise(core.Parallelism{DP: 2, Zero: 3, ParamPersistenceThreshold: core.ZeroSize{N: 0, Set: true}})
	// embed_tokens and lm_head 1024 x 256, per layer q and o 256 x 256, k and
	// v 128 x 256, gate, up and down 1024 x 256 (the model has no norms):
	// bf16, each a multiple of 512 bytes
	var policy int64 = 2 * (2*1024*256 + 2*(2*256*256+2*128*256+3*1024*256))
	if zero3 != ddp+policy {
		t.Errorf("ZeRO-3's generation rises %d B, DDP's %d: %d more, want the policy's %d B", zero3, ddp, zero3-ddp, policy)
	}
	if _, replayed := rise(core.Parallelism{DP: 2, FSDP: true}); replayed {
		t.Error("FSDP2's generation replayed")
	}
}

// The generation runs with the gradients None (after the optimizer step's
// zero_grad): what is live when it begins is the same whether the
// replayed micro-batch accumulates gradients or not, on one GPU and under
// ZeRO-1 and 2, whose accumulated gradients are made after it.
func TestGenerationPassBeforeAccumulatedGradients(t *testing.T) {
	before := func(accum int64, par core.Parallelism) int64 {
		plan := grpoGenPlan(2, 512, accum, 448)
		plan.Parallel = par
		plan.Preference.GRPOConfig.StepsPerGeneration = 1 // the same generation batch
		prog, err := plan.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(prog, plan, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var at int64
		for _, p := range r.Rep.Timeline {
			if p.Phase == PhaseGeneration {
				return at
			}
			at = p.Allocated
		}
		t.Fatalf("accum %d, %+v: no generation phase", accum, par)
		return 0
	}
	for _, par := range []core.Parallelism{{}, {DP: 2}, {DP: 2, Zero: 1}, {DP: 2, Zero: 2}} {
		if a, b := before(1, par), before(4, par); a != b {
			t.Errorf("%+v: %d B live before the generation with grad_accum 4, %d with 1", par, b, a)
		}
	}
}
