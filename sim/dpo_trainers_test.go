package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOTrainers counts torchtune's and LLaMA-Factory's DPO
// log-probabilities (sim/core/dpo_logits.go) by hand on dpoPlan's pair (2
// rows of 1,024 tokens, V = 32,000, bf16): the logits B = 131,072,000
// bytes, their fp32 copy F = 262,144,000, the shifted rows' fp32 S =
// 261,888,000 ([2, 1,023, 32,000]; a row's half, H = 130,944,000), the
// labels' clone 16,368 (int64 [2, 1,023]), the per-token log-probabilities
// 8,184 (fp32 [2, 1,023, 1]).
//
//   - torchtune's LoRA recipes: the micro-batch before's reference logits
//     (F) live from before the forward until the policy has scored its rows;
//     the policy's fp32 copy, logits / temperature (S, freed once
//     log_softmax has made its saved S), the policy's fp32 logits deleted
//     after the log-probabilities; the reference's fp32 logits held through
//     the backward and the optimizer step. Backward: the gather's gradient
//     S, log_softmax's S (its saved output and the gather's gradient
//     going), the division's F (the logits' whole gradient), the cast's B.
//   - torchtune's full recipe: the same in two halves of one row each (H
//     apiece), the reference's logits deleted; in the backward the
//     rejected half's division makes the logits' gradient F and the
//     chosen half's adds into it.
//   - LLaMA-Factory: no division; log_softmax copies the shifted slice
//     (S, freed when its output S is made), the policy's fp32 logits held
//     until the loss, the reference's gone with its function.
func TestDPOTrainers(t *testing.T) {
	const (
		b, f, s, h = 131_072_000, 262_144_000, 261_888_000, 130_944_000
		lab, tok   = 16_368, 8_184
	)
	for _, tc := range []struct {
		name, trainer, ref string
		events             []opEventCase
		optimizerEnd       int64 // the optimizer step's last event
	}{
		{"torchtune lora", core.TrainerTorchtune, core.RefAdapters, []opEventCase{
			{"reference_outputs", replay.PhaseForward, []int64{f, -f}},
			{"to_fp32", replay.PhaseForward, []int64{f, -b}},
			{"log_probs.temperature", replay.PhaseForward, []int64{s}},
			{"log_probs.log_softmax", replay.PhaseForward, []int64{s, -s}},
			{"log_probs.logits", replay.PhaseForward, []int64{-f}},
			{"reference.to_fp32", replay.PhaseForward, []int64{f, -b}},
			{"reference.log_probs.gather", replay.PhaseForward, []int64{tok, -s, -lab}},
			{"log_probs.gather", replay.PhaseBackward, []int64{s, -tok, -lab}},
			{"log_probs.log_softmax", replay.PhaseBackward, []int64{s, -s, -s}},
			{"log_probs.temperature", replay.PhaseBackward, []int64{f, -s}},
			{"to_fp32", replay.PhaseBackward, []int64{b, -f}},
		}, -f},
		{"torchtune full", core.TrainerTorchtune, core.RefModel, []opEventCase{
			{"log_probs.chosen.temperature", replay.PhaseForward, []int64{h}},
			{"log_probs.chosen.log_softmax", replay.PhaseForward, []int64{h, -h}},
			{"log_probs.rejected.log_softmax", replay.PhaseForward, []int64{h, -h}},
			{"ref_model.log_probs.logits", replay.PhaseForward, []int64{-f}},
			{"log_probs.rejected.temperature", replay.PhaseBackward, []int64{f, -h}},
			{"log_probs.chosen.temperature", replay.PhaseBackward, []int64{-h}},
		}, 0},
		{"llamafactory lora", core.TrainerLlamaFactory, core.RefAdapters, []opEventCase{
			{"to_fp32", replay.PhaseForward, []int64{f, -b}},
			{"log_probs.log_softmax", replay.PhaseForward, []int64{s, s, -s}},
			{"reference.log_probs.log_softmax", replay.PhaseForward, []int64{s, s, -s}},
			{"reference.log_probs.logits", replay.PhaseForward, []int64{-f}},
			{"loss.dpo_loss", replay.PhaseForward, []int64{4, -8, -8, -f}},
			{"log_probs.log_softmax", replay.PhaseBackward, []int64{f, -s, -s}},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dpoPlan(tc.ref, "")
			p.Preference.Trainer = tc.trainer
			r, err := Evaluate(p, core.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			checkOpEvents(t, r.Trace, tc.events)
			opt := opEvents(r.Trace, "optimizer.step", replay.PhaseOptimizer)
			if held := len(opt) > 0 && opt[len(opt)-1] == -f; held != (tc.optimizerEnd == -f) {
				t.Errorf("the reference's fp32 logits held to the step's end: %v, want %v (optimizer events %v)", held, tc.optimizerEnd == -f, opt)
			}
		})
	}
}

// TestDPOTrainersSaved holds the whole-logits log-probabilities to what
// autograd saves for them on the CPU (torch 2.15,
// `/work/venv-t/bin/python tools/oracle/dpo_saved.py`, one line an op):
// DivBackward0 (torchtune's temperature) saves only the divisor, a 0-dim
// wrapped scalar (no device tensor); LogSoftmaxBackward0 its result;
// GatherBackward0 the index (a view of the labels' clone) and its input,
// which is that result again; MulBackward0 the bool loss mask alone.
func TestDPOTrainersSaved(t *testing.T) {
	for _, trainer := range []string{core.TrainerTorchtune, core.TrainerLlamaFactory} {
		p := dpoPlan(core.RefAdapters, "")
		p.Preference.Trainer = trainer
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		ops := map[string]*core.OpInfo{}
		for i := range prog.Ops {
			ops[prog.Ops[i].Name] = &prog.Ops[i]
		}
		savedNames := func(name string) []string {
			op := ops[name]
			if op == nil {
				return []string{"(no op " + name + ")"}
			}
			var out []string
			for _, v := range op.Saved {
				out = append(out, prog.Values[v].Name)
			}
			return out
		}
		for _, tc := range []struct {
			op   string
			want []string
		}{
			{"log_probs.log_softmax", []string{"log_probs.log_softmax"}},
			{"log_probs.gather", []string{"log_probs.labels"}},
			{"log_probs.masked", []string{"log_probs.loss_mask"}},
			{"reference.log_probs.log_softmax", nil}, // under no_grad
		} {
			if got := savedNames(tc.op); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %s saves %v, want %v", trainer, tc.op, got, tc.want)
			}
		}
		if trainer == core.TrainerTorchtune {
			if got := savedNames("log_probs.temperature"); len(got) != 0 {
				t.Errorf("torchtune: the temperature's division saves %v, want nothing", got)
			}
		} else if ops["log_probs.temperature"] != nil {
			t.Errorf("llamafactory: a temperature division, which get_batch_logps has not")
		}
	}
}
