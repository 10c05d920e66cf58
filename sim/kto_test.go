package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// ktoPlan is two unpaired rows of 1,024 tokens through dpoPlan's small
// Llama (hidden 512, 2 layers, a 32,000-word vocabulary) in bf16 as TRL's
// KTOTrainer runs it.
func ktoPlan(ref, trl, loss string) *core.Plan {
	p := dpoPlan(ref, trl)
	p.Batch = 2
	p.Preference.Loss = loss
	return p
}

// TestKTOLogits counts TRL 1.8.0's KTO step (sim/core/kto.go) by hand on
// ktoPlan with a reference copy: the logits L = bf16 [2, 1,024, 32,000]
// 131,072,000; a row's log_softmax R = [1,023, 32,000] 65,472,000.
//
//   - the policy's KL forward under no_grad: its logits L, each row's
//     log_softmax R dropped after its gather, the logits dropped when
//     _compute_kl_logps returns;
//   - the policy's forward: its logits and rows as DPO's (TestDPOLogits),
//     then index_select's copies of every row's logits, L;
//   - the reference's KL forward as the policy's, then its forward, whose
//     logits are held to the loss;
//   - entropy_from_logits: the shifted logits flattened, a copy [2,046,
//     32,000] 130,944,000; per chunk of 128 rows (here the 2,046 rows'
//     first: min(n, 128)) log_softmax, exp and their product, bf16
//     [128, 32,000] 8,192,000 each; the entropies [2,046] 4,092;
//   - the loss drops the policy's logits, their copies and the
//     reference's logits.
func TestKTOLogits(t *testing.T) {
	r, err := Evaluate(ktoPlan(core.RefModel, core.TRLLogits, core.LossKTO), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const logits, row, flat, chunk = 131_072_000, 65_472_000, 130_944_000, 8_192_000
	checkOpEvents(t, r.Trace, []opEventCase{
		{"batch", replay.PhaseSetup, []int64{16_384, 16_384, 16_384}}, // input_ids, labels, KL_input_ids
		{"KL.lm_head", replay.PhaseForward, []int64{logits, -2_097_152}},
		{"KL.selective_log_softmax.gather_0", replay.PhaseForward, []int64{2_046, -row}},
		{"KL.KL_logits", replay.PhaseForward, []int64{-logits}},
		{"lm_head", replay.PhaseForward, []int64{logits}},
		{"selective_log_softmax.log_softmax_1", replay.PhaseForward, []int64{row}},
		{"chosen_rejected_logits", replay.PhaseForward, []int64{logits}},
		{"KL.ref_model.KL_logits", replay.PhaseForward, []int64{-logits}},
		{"ref_model.lm_head", replay.PhaseForward, []int64{logits, -2_097_152}},
		{"entropy.flat_logits", replay.PhaseForward, []int64{flat}},
		{"entropy.entropy_from_logits", replay.PhaseForward, []int64{4_092, chunk, chunk, chunk, -chunk, -chunk, -chunk, -flat}},
		{"loss.kto_loss", replay.PhaseForward, []int64{4, -4, -4, -4, -4, -logits, -logits, -logits}},
	})
	// Under loss="apo_zero_unpaired" no KL forward runs and no
	// KL_input_ids are loaded.
	r, err = Evaluate(ktoPlan(core.RefModel, core.TRLLogits, core.LossAPOZeroUnpaired), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"batch", replay.PhaseSetup, []int64{16_384, 16_384}},
		{"KL.lm_head", replay.PhaseForward, nil},
		{"loss.kto_loss", replay.PhaseForward, []int64{4, -4, -4, -logits, -logits, -logits}},
	})
}

// TestKTOFusedHead: under TRL 1.15 (1.15.0 and 1.16.0 read) the policy's
// forward is patched with outputs=("log_probs", "entropy", "mean_logits")
// and the reference copy's with the log-probabilities alone: n = 2 x
// 1,023 = 2,046 positions, fp32 [n] 8,184 a field. The policy's fused
// head makes log_z, the log-probabilities, the entropy and the mean
// logits, nine fp32 [n] statistics (seven, log(sum_exp) and x_sum_exp /
// sum_exp) and the tile bf16 [2,046, 32,000] 130,944,000, and scatters its
// three outputs ([2, 1,023] fp32 8,184 each, a zeros tensor apiece); the
// reference's makes two outputs and eight statistics. The KL forwards are
// the same heads under no_grad, everything dropped when they return but
// the [2] sums.
func TestKTOFusedHead(t *testing.T) {
	r, err := Evaluate(ktoPlan(core.RefModel, core.TRLFusedHead, core.LossKTO), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const n32, tile = 8_184, 130_944_000
	stats := func(k int) []int64 {
		var out []int64
		for range k {
			out = append(out, n32)
		}
		return out
	}
	neg := func(k int) []int64 {
		var out []int64
		for range k {
			out = append(out, -n32)
		}
		return out
	}
	join := func(parts ...[]int64) []int64 {
		var out []int64
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"fused_lm_head.chunked_logprob", replay.PhaseForward, join(stats(4+9), []int64{tile}, neg(9), []int64{-tile})},
		{"fused_lm_head.mean_logits_scattered", replay.PhaseForward, []int64{n32, n32, -n32, -n32}},
		{"ref_model.fused_lm_head.chunked_logprob", replay.PhaseForward, join(stats(2+8), []int64{tile}, neg(8), []int64{-tile}, []int64{-2_095_104, -16_368, -n32})},
		{"KL.fused_lm_head.mean_logits_scattered", replay.PhaseForward, []int64{n32, n32, -n32, -n32, -2_046, -n32}},
		{"KL.logps", replay.PhaseForward, []int64{8, -n32}},
		{"KL.ref_model.logps", replay.PhaseForward, []int64{8, -n32}},
	})
}

// TestKTOLlamaFactory counts LLaMA-Factory's stage kto (sim/core/kto.go,
// ktoLossLlamaFactory; train/kto/trainer.py at ff6d4d12e) by hand on
// ktoPlan with LoRA: the logits B = bf16 [2, 1,024, 32,000] 131,072,000,
// their fp32 copy F = 262,144,000, the shifted rows' log_softmax S =
// fp32 [2, 1,023, 32,000] 261,888,000, the labels' clone 16,368, the
// per-token log-probabilities 8,184.
//
//   - the policy's forward: its fp32 logits F (B dropped), log_softmax's
//     contiguous copy S (dropped once its output S is made, saved);
//   - its KL forward under no_grad, after it: the same, the log_softmax
//     dropped after the gather, the fp32 logits when forward() returns;
//   - the desirable and undesirable rows' fp32 logits copied (F), held to
//     the loss, the policy's fp32 logits dropped with concatenated_forward;
//   - the reference's forward (adapters disabled) and its KL forward, the
//     reference's fp32 logits held through it, then copied (F) and both
//     dropped at once.
func TestKTOLlamaFactory(t *testing.T) {
	p := ktoPlan(core.RefAdapters, "", core.LossKTO)
	p.Preference.Trainer = core.TrainerLlamaFactory
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const b, f, s, lab, tok = 131_072_000, 262_144_000, 261_888_000, 16_368, 8_184
	checkOpEvents(t, r.Trace, []opEventCase{
		{"to_fp32", replay.PhaseForward, []int64{f, -b}},
		{"log_probs.log_softmax", replay.PhaseForward, []int64{s, s, -s}},
		{"KL.to_fp32", replay.PhaseForward, []int64{f, -b}},
		{"KL.log_probs.gather", replay.PhaseForward, []int64{tok, -s, -lab}},
		{"KL.log_probs.logits", replay.PhaseForward, []int64{-f}},
		{"chosen_rejected_logits", replay.PhaseForward, []int64{f, -f}},
		{"reference.log_probs.gather", replay.PhaseForward, []int64{tok, -s, -lab}},
		{"KL.reference.log_probs.logits", replay.PhaseForward, []int64{-f}},
		{"reference.chosen_rejected_logits", replay.PhaseForward, []int64{f, -f, -f}},
		{"loss.kto_loss", replay.PhaseForward, []int64{4, -8, -8, -8, -8, -f}},
		{"log_probs.log_softmax", replay.PhaseBackward, []int64{f, -s, -s}},
	})
	if r.Notes[len(r.Notes)-1] == "" || !strings.Contains(r.Notes[len(r.Notes)-1], "LLaMA-Factory's stage kto") {
		t.Errorf("note %q, want LLaMA-Factory's stage kto", r.Notes[len(r.Notes)-1])
	}
}

// TestKTOLiveAsTRL holds the vocabulary-sized tensors of memsh's replay
// of TRL 1.8.0's KTO forward to what the same step allocates on the CPU
// (torch 2.15, transformers 5.25, `/work/venv-t/bin/python
// tools/oracle/kto_live.py`): a LlamaForCausalLM of hidden 64, 2 layers,
// 4 heads, 2 key-value heads, intermediate 128 and V = 1,000 in bf16, 2
// rows of 9 tokens, a reference copy. The oracle's tensors of at least a
// row's shifted logits (16,000 bytes), summed after each op, peak at
// 268,000 bytes in entropy_from_logits' multiply: the policy's logits
// [18, 1,000] 36,000, its two rows' saved log_softmax [8, 1,000] 16,000
// each, the chosen and the rejected row's index_select copies [1, 9,
// 1,000] 18,000 each, the reference's logits 36,000, the flattened
// shifted logits' copy [2, 8, 1,000] 32,000 and the chunk's log_softmax,
// exp and product [16, 1,000] 32,000 each.
func TestKTOLiveAsTRL(t *testing.T) {
	p := ktoLivePlan()
	p.Preference = &core.Preference{Reference: core.RefModel, TRL: core.TRLLogits, Loss: core.LossKTO}
	if peak, at := vocabLive(t, p, false); peak != 268_000 || at != "entropy.entropy_from_logits" {
		t.Errorf("the vocabulary-sized tensors peak at %d bytes in %s, want 268,000 in entropy.entropy_from_logits (TRL 1.8.0 on the CPU)", peak, at)
	}
}

// TestKTOLiveAsLlamaFactory holds memsh's replay of LLaMA-Factory's stage
// kto (ff6d4d12e) to the same oracle's second line, on the same model and
// rows: F = the fp32 logits [2, 9, 1,000] 72,000, S = their shifted
// log_softmax [2, 8, 1,000] 64,000. Measured after each op (the oracle
// does not see log_softmax's contiguous copy inside the op), the tensors
// of at least a row's shifted logits peak at 344,000 bytes in the
// reference's KL log_softmax: the policy's saved log_softmax S, its
// desirable and undesirable rows' logits copied (two [1, 9, 1,000] fp32
// copies, 36,000 each), the reference's fp32 logits F, held through its
// KL forward, and that forward's fp32 logits F and log_softmax S.
func TestKTOLiveAsLlamaFactory(t *testing.T) {
	p := ktoLivePlan()
	p.Preference = &core.Preference{Reference: core.RefModel, Trainer: core.TrainerLlamaFactory, Loss: core.LossKTO}
	if peak, at := vocabLive(t, p, true); peak != 344_000 || at != "KL.ref_model.log_probs.log_softmax" {
		t.Errorf("the vocabulary-sized tensors peak at %d bytes in %s, want 344,000 in KL.ref_model.log_probs.log_softmax (LLaMA-Factory on the CPU)", peak, at)
	}
}

// ktoLivePlan is kto_live.py's model and rows: a Llama of hidden 64, 2
// layers, 4 heads, 2 key-value heads, intermediate 128, V = 1,000, bf16,
// 2 rows of 9 tokens.
func ktoLivePlan() *core.Plan {
	m := testmodels.Llama(64, 2, 4, 2, 128, 1000, "flash")
	return testmodels.LlamaPlan(m, 2, 9, "bf16", "none", "H100-80GB")
}

// vocabLive replays p and sums the forward's tensors of at least one
// row's shifted logits (16,000 bytes here), as kto_live.py does: the
// largest sum and the op it is reached in, after every event or, with
// opEnds, only once an op's events are done.
func vocabLive(t *testing.T, p *core.Plan, opEnds bool) (int64, string) {
	t.Helper()
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const rowBytes = 16_000
	var sum, peak int64
	at, op := "", ""
	for _, e := range r.Trace.SteadyEvents() {
		if e.Phase != replay.PhaseForward || e.Size < rowBytes {
			continue
		}
		if opEnds && e.Op != op && sum > peak {
			peak, at = sum, op
		}
		op = e.Op
		switch e.Action {
		case "alloc":
			sum += e.Size
		case "free_completed":
			sum -= e.Size
		}
		if !opEnds && sum > peak {
			peak, at = sum, e.Op
		}
	}
	if opEnds && sum > peak {
		peak, at = sum, op
	}
	return peak, at
}

// TestKTOParams: the KL forwards call the policy's and the reference's
// modules again, registering no parameter of their own; the policy's
// parameters train as without KTO, the reference copy's are its own.
func TestKTOParams(t *testing.T) {
	for _, ref := range []string{core.RefModel, core.RefAdapters, core.RefPrecomputed} {
		for _, trl := range []string{core.TRLLogits, core.TRLFusedHead} {
			p := ktoPlan(ref, trl, core.LossKTO)
			own := *p
			own.Preference = nil
			want, err := own.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatalf("%s %s: %v", ref, trl, err)
			}
			extra := 0
			if ref == core.RefModel {
				extra = len(want.Params)
			}
			if got := len(prog.Params) - len(want.Params); got != extra {
				t.Errorf("%s %s: %d parameters beyond the plan's, want %d", ref, trl, got, extra)
			}
			for i, pi := range want.Params {
				got := prog.Params[i]
				if got.Name != pi.Name || got.Trainable != pi.Trainable || got.TiedTo != pi.TiedTo {
					t.Errorf("%s %s: parameter %d %s trainable %v tied %d, want %s %v %d", ref, trl, i, got.Name, got.Trainable, got.TiedTo, pi.Name, pi.Trainable, pi.TiedTo)
				}
			}
			for _, op := range prog.Ops {
				if strings.HasPrefix(op.Name, core.KLForward+".") && len(op.Saved) > 0 {
					t.Errorf("%s %s: KL op %s saves %d tensors under no_grad", ref, trl, op.Name, len(op.Saved))
				}
				if strings.HasPrefix(op.Name, core.KLForward+"."+core.RefForward+".") && strings.Contains(op.Name, ".lora") {
					t.Errorf("%s %s: reference KL op %s runs an adapter", ref, trl, op.Name)
				}
			}
		}
	}
}

// TestKTOAutocastCache: under autocast with fp32 weights the KL forward
// makes each trainable weight's bf16 copy and the policy's forward reads
// it from autocast's cache (measured on the CPU, torch 2.15: a weight's
// cast made under no_grad is not made again by the next call with grad,
// whose weights still get their gradients): one cast a weight, as
// without KTO.
func TestKTOAutocastCache(t *testing.T) {
	count := func(p *core.Plan) int {
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, op := range prog.Ops {
			if op.Kind == "cast" && len(op.Params) > 0 {
				k++
			}
		}
		return k
	}
	p := ktoPlan(core.RefPrecomputed, core.TRLLogits, core.LossKTO)
	p.Precision, _ = core.LookupPrecision("bf16-mixed")
	own := *p
	own.Preference = nil
	if got, want := count(p), count(&own); got != want || want == 0 {
		t.Errorf("%d weight casts under KTO, want %d (one a weight)", got, want)
	}
}

// TestKTORows: a KTO batch counts rows.
func TestKTORows(t *testing.T) {
	p := ktoPlan(core.RefPrecomputed, core.TRLFusedHead, core.LossKTO)
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	if got := prog.Values[prog.Input].Shape; got[0] != 2 || got[1] != 1024 {
		t.Errorf("input_ids %v, want [2 1024]", got)
	}
	if got := timing.StepTokens(p, 1, 1); got != 2048 {
		t.Errorf("step tokens %g, want 2,048", got)
	}
}

// TestKTORefused: what KTO is not modelled with is refused, by name.
func TestKTORefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"one row", func(p *core.Plan) { p.Batch = 1 }, "needs batch >= 2"},
		{"unknown loss", func(p *core.Plan) { p.Preference.Loss = "bco" }, `unknown loss "bco"`},
		{"no reference", func(p *core.Plan) { p.Preference.Reference = core.RefNone }, `unknown reference "none"`},
		{"torchtune", func(p *core.Plan) { p.Preference.Trainer = core.TrainerTorchtune }, "TRL's KTOTrainer and LLaMA-Factory's stage kto"},
		{"trl 1.14", func(p *core.Plan) { p.Preference.TRL = "1.14" }, `unknown trl "1.14"`},
		{"zero 3 with the KL forward", func(p *core.Plan) {
			p.Parallel, p.Preference.TRL = core.Parallelism{DP: 2, Zero: 3}, core.TRLLogits
		}, `loss="kto" under ZeRO-3`},
		{"fsdp", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 2} }, "preference=kto() under FSDP is not modelled"},
		{"adapters without lora", func(p *core.Plan) { p.Preference.Reference = core.RefAdapters }, `reference="adapters" disables`},
		{"trl under llamafactory", func(p *core.Plan) { p.Preference.Trainer = core.TrainerLlamaFactory }, `trl="1.15" picks a TRL release`},
		{"apo zero under llamafactory", func(p *core.Plan) {
			p.Preference.Trainer, p.Preference.TRL, p.Preference.Loss = core.TrainerLlamaFactory, "", core.LossAPOZeroUnpaired
		}, "always runs the KL forwards"},
		{"precomputed under llamafactory", func(p *core.Plan) {
			p.Preference.Trainer, p.Preference.TRL, p.Preference.Reference = core.TrainerLlamaFactory, "", core.RefPrecomputed
		}, "scores the reference in every step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ktoPlan(core.RefModel, core.TRLFusedHead, core.LossKTO)
			tc.edit(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// LLaMA-Factory's stage kto runs one row (it skips TRL's check).
	lf := ktoPlan(core.RefModel, "", core.LossKTO)
	lf.Preference.Trainer, lf.Batch = core.TrainerLlamaFactory, 1
	if err := lf.Validate(); err != nil {
		t.Errorf("llamafactory with one row: %v", err)
	}
	// Without the KL forward a reference copy runs under ZeRO-3 as DPO's.
	p := ktoPlan(core.RefModel, core.TRLLogits, core.LossAPOZeroUnpaired)
	p.Parallel = core.Parallelism{DP: 2, Zero: 3}
	if err := p.Validate(); err != nil {
		t.Errorf("apo_zero_unpaired under ZeRO-3: %v", err)
	}
}
