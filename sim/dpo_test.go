package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// dpoPlan is one pair (2 rows of 1,024 tokens) through the small Llama of
// chunkedLossPlan (hidden 512, 2 layers, a 32,000-word vocabulary) in
// bf16 as TRL's DPOTrainer runs it.
func dpoPlan(ref, trl string) *core.Plan {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 1, 1024, "bf16", "none", "H100-80GB")
	if ref == core.RefAdapters {
		p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj", "v_proj"}}
	}
	p.Preference = &core.Preference{Reference: ref, TRL: trl}
	return p
}

// TestDPOFusedHead counts TRL 1.15's fused LM head (sim/core/
// trl_fused_head.go, trl 1.16.0's add_fused_lm_head and
// ChunkedLogProbFunction) by hand: 2 rows of 1,024 tokens, every position
// but a row's last scored, so n = 2 x 1,023 = 2,046; hidden 512, V =
// 32,000 (one vocabulary tile: under 32,768), bf16:
//
//   - labels[:, 1:] != -100: bool [2, 1,023] 2,046;
//   - hidden_states[mask]: bf16 [n, 512] 2,095,104, the kernel's nonzero
//     int64 [n, 2] 32,736 dropped at once (IndexBackward0 saves the bool
//     mask: TestTRLSFTHeadSavedAsTRL measured it); the final norm's output
//     (bf16 [2, 1,024, 512] 2,097,152) is read by nothing else and goes;
//     labels[mask]: int64 [n] 16,368;
//   - ChunkedLogProbFunction: log_z and the log-probabilities, fp32 [n]
//     8,184 each; seven running statistics and log(sum_exp), fp32 [n]
//     8,184 each, and mm_buf bf16 [n, 32,000] 130,944,000, dropped at its
//     end; it saves the hidden copy, the targets and log_z;
//   - new_zeros(mask.shape).masked_scatter(mask, x): fp32 [2, 1,023]
//     8,184 (the scattered copy), its zeros 8,184 dropped, and the [n]
//     log-probabilities with them;
//   - the backward: grad_hidden fp32 [n, 512] 4,190,208 and grad_weight
//     fp32 [32,000, 512] 65,536,000 (lm_head trains: a full fine-tune),
//     mm_buf 130,944,000, their bf16 copies as the gradients (2,095,104
//     and 32,768,000); then IndexBackward0's zeros_like of the sliced
//     hidden states bf16 [2, 1,023, 512] 2,095,104, index_put_'s nonzero
//     of the mask again (int64 [n, 2] 32,736) and three int64 [n] linear
//     indices 16,368 each, and SliceBackward0's gradient of the whole
//     hidden states 2,097,152; the mask goes after it.
//
// The reference model's forward (ref_model.*) runs the same head under
// no_grad: nothing saved, the indices dropped at once.
func TestDPOFusedHead(t *testing.T) {
	r, err := Evaluate(dpoPlan(core.RefModel, core.TRLFusedHead), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const (
		n32, hs, tile = 8_184, 2_095_104, 130_944_000
	)
	checkOpEvents(t, r.Trace, []opEventCase{
		{"fused_lm_head.label_mask", replay.PhaseForward, []int64{2_046}},
		{"fused_lm_head.hidden_states_masked", replay.PhaseForward, []int64{hs, 32_736, -32_736, -2_097_152}},
		{"fused_lm_head.labels_masked", replay.PhaseForward, []int64{16_368}},
		{"fused_lm_head.chunked_logprob", replay.PhaseForward, []int64{n32, n32, n32, n32, n32, n32, n32, n32, n32, n32, tile,
			-n32, -n32, -n32, -n32, -n32, -n32, -n32, -n32, -tile}},
		{"fused_lm_head.log_probs", replay.PhaseForward, []int64{n32, n32, -n32, -n32}},
		{"fused_lm_head.chunked_logprob", replay.PhaseBackward, []int64{4_190_208, 65_536_000, tile, hs, 32_768_000,
			-4_190_208, -65_536_000, -tile, -n32, -hs, -16_368, -n32}},
		{"fused_lm_head.hidden_states_masked", replay.PhaseBackward, []int64{hs, 32_736, 16_368, 16_368, 16_368, 2_097_152,
			-hs, -32_736, -16_368, -16_368, -16_368, -hs, -2_046}},
		{"ref_model.fused_lm_head.hidden_states_masked", replay.PhaseForward, []int64{hs, 32_736, -32_736, -2_097_152}},
	})
}

// TestDPOLogits counts TRL 1.8's log-probabilities (sim/core/
// trl_logits.go, trl 1.8.0's _compute_loss and selective_log_softmax) by
// hand on the same pair: the logits bf16 [2, 1,024, 32,000] 131,072,000,
// held until the loss; each row's log_softmax bf16 [1,023, 32,000]
// 65,472,000 (saved) and its gathered targets [1,023, 1] 2,046; the
// stack [2, 1,023] 4,092, the completion mask 2,046 and the sums 4. The
// reference's rows drop their log_softmax after the gather. The loss
// drops both logits. The backward: each row's gather gradient 65,472,000,
// and the logits' gradient 131,072,000 at the last row's backward (memsh
// adds the rows into it: trl_logits.go), the row's gradient and saved
// log_softmax going with it.
func TestDPOLogits(t *testing.T) {
	r, err := Evaluate(dpoPlan(core.RefModel, core.TRLLogits), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const logits, row = 131_072_000, 65_472_000
	checkOpEvents(t, r.Trace, []opEventCase{
		{"lm_head", replay.PhaseForward, []int64{logits}},
		{"selective_log_softmax.log_softmax_0", replay.PhaseForward, []int64{row}},
		{"selective_log_softmax.gather_0", replay.PhaseForward, []int64{2_046}},
		{"selective_log_softmax.per_token_logps", replay.PhaseForward, []int64{4_092, -2_046, -2_046}},
		{"ref_model.selective_log_softmax.gather_1", replay.PhaseForward, []int64{2_046, -row}},
		{"loss.dpo_loss", replay.PhaseForward, []int64{4, -4, -4, -logits, -logits}},
		{"selective_log_softmax.gather_1", replay.PhaseBackward, []int64{row}},
		{"selective_log_softmax.log_softmax_1", replay.PhaseBackward, []int64{logits, -row, -row}},
		{"selective_log_softmax.log_softmax_0", replay.PhaseBackward, []int64{-row, -row}},
	})
}

// TestDPOReference holds the three references to what each keeps: a
// frozen copy of every weight under ref_model (its own embedding, which
// its lm_head does not tie: the small Llama ties none), the policy's own
// weights with no adapter op in the reference forward, or no reference
// forward at all; and the reference forward saves nothing.
func TestDPOReference(t *testing.T) {
	plain := dpoPlan(core.RefModel, core.TRLFusedHead)
	plain.Preference = nil
	base, err := plain.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref         string
		extraParams int // beyond the plan's own (its adapters included)
		refOps      bool
	}{
		{core.RefModel, len(base.Params), true},
		{core.RefAdapters, 0, true},
		{core.RefPrecomputed, 0, false},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			p := dpoPlan(tc.ref, core.TRLFusedHead)
			own := *p
			own.Preference = nil
			want, err := own.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(prog.Params) - len(want.Params); got != tc.extraParams {
				t.Errorf("%d parameters beyond the plan's, want %d", got, tc.extraParams)
			}
			for _, pi := range prog.Params {
				if strings.HasPrefix(pi.Name, "ref_model.") && (pi.Trainable || pi.TiedTo >= 0) {
					t.Errorf("reference parameter %s: trainable %v, tied to %d; want frozen and its own", pi.Name, pi.Trainable, pi.TiedTo)
				}
			}
			// The reference forward: from the first op after the policy's
			// summed log-probabilities to the loss.
			start, refOps := -1, 0
			for i, op := range prog.Ops {
				if op.Name == "logps" {
					start = i + 1
					continue
				}
				if start < 0 || op.Kind == core.PreferenceOp {
					continue
				}
				refOps++
				if len(op.Saved) > 0 {
					t.Errorf("reference op %s saves %d tensors under no_grad", op.Name, len(op.Saved))
				}
				if strings.Contains(op.Name, ".lora") {
					t.Errorf("reference op %s runs an adapter (disabled in the reference)", op.Name)
				}
			}
			if (refOps > 0) != tc.refOps {
				t.Errorf("%d reference ops, want some: %v", refOps, tc.refOps)
			}
		})
	}
}

// TestDPORows: a pair is two rows; the step's tokens count both.
func TestDPORows(t *testing.T) {
	p := dpoPlan(core.RefPrecomputed, core.TRLFusedHead)
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

// TestDPORefused: what DPO is not modelled with is refused, by name.
func TestDPORefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"adapters without lora", func(p *core.Plan) { p.Preference.Reference = core.RefAdapters }, `reference="adapters" disables`},
		{"unknown reference", func(p *core.Plan) { p.Preference.Reference = "copy" }, `unknown reference "copy"`},
		{"unknown trl", func(p *core.Plan) { p.Preference.TRL = "1.14" }, `unknown trl "1.14"`},
		{"tensor parallel", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 1, TP: 2} }, "tensor, pipeline, context and expert parallelism"},
		{"fsdp1 with the reference copy", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1} }, "with a reference copy under FSDP1 is not modelled"},
		{"fsdp without reshard", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, FSDP: true, NoReshard: true} }, "reshard_after_forward=True and no CPU offload"},
		{"fsdp reshard to", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, FSDP: true, ReshardTo: 2} }, "reshard_after_forward=True and no CPU offload"},
		{"fsdp with cpu offload", func(p *core.Plan) {
			p.Parallel, p.Offload = core.Parallelism{DP: 2, FSDP: true}, &core.Offload{Params: "cpu", Optimizer: "cpu"}
		}, "reshard_after_forward=True and no CPU offload"},
		{"fsdp1 with the adapters' reference", func(p *core.Plan) {
			p.Parallel, p.Preference.Reference = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, core.RefAdapters
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q"}}
		}, `with reference="adapters" under FSDP1 is not modelled`},
		{"loss_chunks", func(p *core.Plan) { p.LossChunks = 4 }, "loss_chunks does not apply"},
		{"liger", func(p *core.Plan) { p.FusedLoss = "liger" }, "loss_chunks does not apply"},
		{"eval", func(p *core.Plan) { p.Phase = core.Eval }, "is a training objective"},
		{"unknown trainer", func(p *core.Plan) { p.Preference.Trainer, p.Preference.TRL = "axolotl", "" }, `unknown trainer "axolotl"`},
		{"trl under torchtune", func(p *core.Plan) { p.Preference.Trainer = core.TrainerTorchtune }, `trl="1.15" picks a TRL release`},
		{"the adapters' reference under openrlhf", func(p *core.Plan) {
			p.Preference.Trainer, p.Preference.TRL, p.Preference.Reference = core.TrainerOpenRLHF, "", core.RefAdapters
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q"}}
		}, `reference="adapters": OpenRLHF's train_dpo always loads its reference as a second model`},
		{"precomputed under llamafactory", func(p *core.Plan) {
			p.Preference.Trainer, p.Preference.TRL, p.Preference.Reference = core.TrainerLlamaFactory, "", core.RefPrecomputed
		}, "computes the reference's log-probabilities in every step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dpoPlan(core.RefModel, core.TRLFusedHead)
			tc.edit(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	fp32 := dpoPlan(core.RefModel, core.TRLLogits)
	fp32.Precision, _ = core.LookupPrecision("fp32")
	if _, err := Evaluate(fp32, core.Options{}); err == nil || !strings.Contains(err.Error(), "selective_log_softmax over fp32 logits") {
		t.Errorf("trl 1.8 over fp32 logits: %v, want it refused", err)
	}
}
