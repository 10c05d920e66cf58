package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// grpoPlan is 2 completions of 1,024 tokens (prompt and completion), the
// last 256 scored, through the small Llama of dpoPlan (hidden 512, 2
// layers, a 32,000-word vocabulary) in bf16, as TRL's GRPOTrainer runs it
// (sim/core/grpo.go).
func grpoPlan(g core.GRPOConfig) *core.Plan {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
	p.Preference = &core.Preference{Reference: core.RefOfGRPO(g.Beta, nil), TRL: core.TRLFusedHead, Loss: core.LossGRPO, GRPOConfig: g}
	return p
}

// TestGRPOFusedHead counts GRPOTrainer's fused LM head by hand (trl 1.16.0:
// _get_per_token_logps_and_entropies sets every label before the last
// logits_to_keep = 256 to -100, and add_fused_lm_head(outputs=("log_probs",
// "entropy")) scores the valid positions alone), 2 rows, so n = 2 x 256 =
// 512; hidden 512, V = 32,000 (one vocabulary tile), bf16:
//
//   - labels[:, 1:] != -100: bool [2, 1,023] 2,046;
//   - hidden_states[mask]: bf16 [512, 512] 524,288, the kernel's nonzero
//     int64 [512, 2] 8,192 dropped at once (the bool mask is what
//     IndexBackward0 saves); the final norm's output (bf16 [2, 1,024,
//     512] 2,097,152) goes; labels[mask]: int64 [512] 4,096;
//   - ChunkedLogProbFunction: log_z, the log-probabilities and the entropy,
//     fp32 [512] 2,048 each; seven running statistics, log(sum_exp) and
//     x_sum_exp / sum_exp, fp32 [512] 2,048 each, and mm_buf bf16 [512,
//     32,000] 32,768,000, dropped at its end;
//   - new_zeros(mask.shape).masked_scatter(mask, x) for the
//     log-probabilities and the entropy: fp32 [2, 1,023] 8,184 each (their
//     zeros dropped; the [512] log-probabilities with them, the entropy
//     saved in log_z's second slot);
//   - the loss: a 0-dim fp32 (4 bytes); the two scattered tensors go when
//     _compute_loss returns;
//   - the backward: grad_hidden fp32 [512, 512] 1,048,576, grad_weight
//     fp32 [32,000, 512] 65,536,000, mm_buf again, their bf16 copies
//     (524,288 and 32,768,000); IndexBackward0's zeros_like of the sliced
//     hidden states bf16 [2, 1,023, 512] 2,095,104, index_put_'s nonzero
//     of the mask (int64 [512, 2] 8,192) and three int64 [512] 4,096, and
//     SliceBackward0's gradient of the whole hidden states 2,097,152; the
//     mask goes after it.
//
// Against a language model's loss over the same rows, no logits: the
// cross-entropy's log_softmax alone would be fp32 [2, 1,024, 32,000].
func TestGRPOFusedHead(t *testing.T) {
	r, err := Evaluate(grpoPlan(core.GRPOConfig{Completion: 256}), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const n32, tile = 2_048, 32_768_000
	checkOpEvents(t, r.Trace, []opEventCase{
		{"fused_lm_head.label_mask", replay.PhaseForward, []int64{2_046}},
		{"fused_lm_head.hidden_states_masked", replay.PhaseForward, []int64{524_288, 8_192, -8_192, -2_097_152}},
		{"fused_lm_head.labels_masked", replay.PhaseForward, []int64{4_096}},
		{"fused_lm_head.chunked_logprob", replay.PhaseForward, []int64{n32, n32, n32, n32, n32, n32, n32, n32, n32, n32, n32, n32, tile,
			-n32, -n32, -n32, -n32, -n32, -n32, -n32, -n32, -n32, -tile}},
		{"fused_lm_head.log_probs", replay.PhaseForward, []int64{8_184, 8_184, -8_184, -n32}},
		{"fused_lm_head.entropy_scattered", replay.PhaseForward, []int64{8_184, 8_184, -8_184}},
		{"loss.grpo_loss", replay.PhaseForward, []int64{4, -8_184, -8_184}},
		{"fused_lm_head.chunked_logprob", replay.PhaseBackward, []int64{1_048_576, 65_536_000, tile, 524_288, 32_768_000,
			-1_048_576, -65_536_000, -tile, -n32, -524_288, -4_096, -n32, -n32}},
		{"fused_lm_head.hidden_states_masked", replay.PhaseBackward, []int64{2_095_104, 8_192, 4_096, 4_096, 4_096, 2_097_152,
			-2_095_104, -8_192, -4_096, -4_096, -4_096, -524_288, -2_046}},
	})
}

// TestGRPORows: the batch counts completions, one row each; the step's
// tokens count prompt and completion.
func TestGRPORows(t *testing.T) {
	p := grpoPlan(core.GRPOConfig{Completion: 256})
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

// TestGRPOReference: beta 0 keeps no reference; beta > 0 under LoRA keeps
// none either (the adapters disabled, scored before the step); a full
// fine-tune keeps a frozen copy of every weight that no op reads, whole on
// one GPU and sharded as the policy under ZeRO-3.
func TestGRPOReference(t *testing.T) {
	plain := grpoPlan(core.GRPOConfig{Completion: 256})
	base, err := plain.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var weights int64 // the policy's, bf16: 76,616,704 B
	for _, pi := range base.Params {
		weights += units.BF16.Bytes(pi.Numel)
	}
	// The breakdown counts the allocator's blocks: the embedding's and
	// lm_head's 32,768,000 B round up to 2 MiB multiples, 33,554,432
	// (kRoundLarge), 1,572,864 B more for the pair; ZeRO-3's shards round
	// up to 512 B each.
	const rounding = 2 * (33_554_432 - 32_768_000)
	for _, tc := range []struct {
		name          string
		beta          float64
		lora          bool
		zero          int
		extra, within int64 // params bytes beyond beta 0's, and by how much they may round up
	}{
		{"beta 0", 0, false, 0, 0, 0},
		{"beta with lora", 0.04, true, 0, 0, 0},
		{"beta, full", 0.04, false, 0, weights + rounding, 0},
		{"beta, full, zero-3 over 4", 0.04, false, 3, weights / 4, 512 * int64(len(base.Params))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := func(beta float64) *core.Plan {
				p := grpoPlan(core.GRPOConfig{Completion: 256, Beta: beta})
				if tc.lora {
					p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj", "v_proj"}}
					p.Preference.Reference = core.RefOfGRPO(beta, p.LoRA)
				}
				if tc.zero > 0 {
					p.Parallel = core.Parallelism{DP: 4, Zero: tc.zero}
				}
				return p
			}
			r0, err := Evaluate(with(0), core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := with(tc.beta)
			r, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Breakdown[core.CatParams].Bytes - r0.Breakdown[core.CatParams].Bytes; got < tc.extra || got > tc.extra+tc.within {
				t.Errorf("params %d bytes beyond beta 0's, want %d (up to %d more)", got, tc.extra, tc.within)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			for _, pi := range prog.Params {
				if strings.HasPrefix(pi.Name, core.RefCopy+".") && (pi.Trainable || !pi.Reference || !pi.Unread) {
					t.Errorf("reference parameter %s: trainable %v, reference %v, unread %v; want frozen, a reference's, read by no op", pi.Name, pi.Trainable, pi.Reference, pi.Unread)
				}
			}
		})
	}
}

// TestGRPOVLLM: a colocated vLLM engine holds vllm_gpu_memory_utilization
// of the GPU's total memory through the step, as a row of its own outside
// the step's allocations; asleep, as a server or not used, nothing.
func TestGRPOVLLM(t *testing.T) {
	none, err := Evaluate(grpoPlan(core.GRPOConfig{Completion: 256}), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h100 := mustDevice(t, "H100-80GB")
	for _, tc := range []struct {
		name string
		g    core.GRPOConfig
		want int64
	}{
		{"colocate 0.3", core.GRPOConfig{Completion: 256, VLLM: core.VLLMColocate, VLLMMemory: 0.3}, int64(0.3 * float64(h100.Memory))},
		{"colocate 0.5", core.GRPOConfig{Completion: 256, VLLM: core.VLLMColocate, VLLMMemory: 0.5}, h100.Memory / 2},
		{"colocate asleep", core.GRPOConfig{Completion: 256, VLLM: core.VLLMColocate, VLLMMemory: 0.3, Sleep: true}, 0},
		{"server", core.GRPOConfig{Completion: 256, VLLM: core.VLLMServer}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Evaluate(grpoPlan(tc.g), core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var vllm int64
			for _, o := range r.Overheads {
				if o.Name == "vllm" {
					vllm = o.Bytes
				}
			}
			if vllm != tc.want {
				t.Errorf("vllm row %d bytes, want %d", vllm, tc.want)
			}
			if r.PeakAllocated != none.PeakAllocated {
				t.Errorf("peak allocated %d, want the step's own %d", r.PeakAllocated, none.PeakAllocated)
			}
			if got := r.DeviceUsed - none.DeviceUsed; got != tc.want {
				t.Errorf("device used %d bytes beyond transformers' generate, want the vllm row's %d", got, tc.want)
			}
		})
	}
}

// TestGRPORefused: what GRPO is not modelled with is refused, by name.
func TestGRPORefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"completion fills seq", func(p *core.Plan) { p.Preference.GRPOConfig.Completion = 1024 }, "no prompt is left"},
		{"no completion", func(p *core.Plan) { p.Preference.GRPOConfig.Completion = 0 }, "completion must be at least 1"},
		{"trl 1.14", func(p *core.Plan) { p.Preference.TRL = "1.14" }, "selective_log_softmax_and_entropy's fused Triton kernel"},
		{"trl 1.9", func(p *core.Plan) { p.Preference.TRL = "1.9" }, `unknown trl "1.9"`},
		{"trl 1.8 over fp32 logits", func(p *core.Plan) {
			p.Preference.TRL = core.TRLLogits
			p.Precision, _ = core.LookupPrecision("fp32")
		}, `trl="1.8": selective_log_softmax over fp32 logits`},
		{"unknown trl", func(p *core.Plan) { p.Preference.TRL = "2.0" }, `unknown trl "2.0"`},
		{"torchtune", func(p *core.Plan) { p.Preference.Trainer = core.TrainerTorchtune }, "memsh replays TRL's GRPOTrainer"},
		{"negative beta", func(p *core.Plan) { p.Preference.GRPOConfig.Beta = -1 }, "beta must be a finite number, 0 or more"},
		{"unknown vllm", func(p *core.Plan) { p.Preference.GRPOConfig.VLLM = "remote" }, `unknown vllm "remote"`},
		{"memory without colocate", func(p *core.Plan) { p.Preference.GRPOConfig.VLLMMemory = 0.4 }, `vllm is not "colocate"`},
		{"sleep without colocate", func(p *core.Plan) { p.Preference.GRPOConfig.Sleep = true }, `vllm is not "colocate"`},
		{"all the gpu", func(p *core.Plan) {
			p.Preference.GRPOConfig.VLLM, p.Preference.GRPOConfig.VLLMMemory = core.VLLMColocate, 1
		}, "vllm_memory must be above 0 and below 1"},
		{"precomputed", func(p *core.Plan) { p.Preference.Reference = core.RefPrecomputed }, "scores its reference before the step"},
		{"reference without beta", func(p *core.Plan) { p.Preference.Reference = core.RefModel }, `reference "model" with beta 0`},
		{"tensor parallel", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 1, TP: 2} }, "tensor, pipeline, context and expert parallelism"},
		{"fsdp1 with the reference copy", func(p *core.Plan) {
			p.Preference.GRPOConfig.Beta, p.Preference.Reference = 0.1, core.RefModel
			p.Parallel = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}
		}, "with a reference copy under FSDP1 is not modelled"},
		{"loss_chunks", func(p *core.Plan) { p.LossChunks = 4 }, "loss_chunks does not apply"},
		{"compile", func(p *core.Plan) { p.Compile = core.Compile{Blocks: true} }, "with compile is not modelled"},
		{"eval", func(p *core.Plan) { p.Phase = core.Eval }, "is a training objective"},
		{"lora on lm_head", func(p *core.Plan) {
			p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj", "lm_head"}}
		}, "reads lm_head.weight directly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := grpoPlan(core.GRPOConfig{Completion: 256})
			tc.edit(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			var ue *units.Error
			if errors.As(err, &ue) && ue.Hint == "" {
				t.Errorf("%v: no hint", err)
			}
		})
	}
}

// TestGRPOGenerationNote: under ZeRO-3, transformers' generate runs on the
// whole policy, gathered (TRL's unwrap_model_for_generation with
// ds3_gather_for_generation, replayed): the note gives its weights' bytes,
// every parameter's full size in bf16; without ZeRO-3, with
// ds3_gather_for_generation False or with vLLM, it does not speak of a
// gather.
func TestGRPOGenerationNote(t *testing.T) {
	p := grpoPlan(core.GRPOConfig{Completion: 256})
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var whole int64
	for _, pi := range prog.Params {
		whole += units.BF16.Bytes(pi.FullNumel)
	}
	gather := "deepspeed.zero.GatheredParameters"
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		want string // "" when the note has no gather
	}{
		{"one gpu", func(p *core.Plan) {}, ""},
		{"zero-2", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 4, Zero: 2} }, ""},
		{"zero-3", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 4, Zero: 3} }, units.FormatBytes(whole) + " on each GPU"},
		{"zero-3, ds3_gather_for_generation False", func(p *core.Plan) {
			p.Parallel, p.Preference.GRPOConfig.NoDS3Gather = core.Parallelism{DP: 4, Zero: 3}, true
		}, ""},
		{"zero-3, vllm server", func(p *core.Plan) {
			p.Parallel, p.Preference.GRPOConfig.VLLM = core.Parallelism{DP: 4, Zero: 3}, core.VLLMServer
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := grpoPlan(core.GRPOConfig{Completion: 256})
			tc.edit(q)
			r, err := Evaluate(q, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(r.Notes, "\n")
			switch {
			case tc.want == "" && strings.Contains(notes, gather):
				t.Errorf("notes speak of a gather:\n%s", notes)
			case tc.want != "" && (!strings.Contains(notes, gather) || !strings.Contains(notes, tc.want)):
				t.Errorf("notes lack %q:\n%s", tc.want, notes)
			}
		})
	}
}

// TestGRPOReferenceNoteSharded: the note gives the reference copy's whole
// bytes, and under ZeRO-3 or FSDP2, which shard it as the policy
// (trl/models/utils.py prepare_deepspeed keeps stage 3; prepare_fsdp
// fully_shard), says so, where a reader took the whole copy for what each
// GPU holds; ZeRO-2 keeps it whole on each GPU (prepare_deepspeed: stage 0).
func TestGRPOReferenceNoteSharded(t *testing.T) {
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		want string // "" when the note says nothing of sharding
	}{
		{"one gpu", core.Parallelism{}, ""},
		{"zero-2", core.Parallelism{DP: 4, Zero: 2}, ""},
		{"zero-3", core.Parallelism{DP: 4, Zero: 3}, "in all, sharded over 4 GPUs as the policy's weights"},
		{"fsdp2", core.Parallelism{DP: 4, FSDP: true, FSDPVersion: 2}, "in all, sharded over 4 GPUs as the policy's weights"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := grpoPlan(core.GRPOConfig{Completion: 256, Beta: 0.04})
			q.Parallel = tc.par
			r, err := Evaluate(q, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(r.Notes, "\n")
			if !strings.Contains(notes, "the reference model is a second copy of the weights") {
				t.Fatalf("no reference copy in the notes:\n%s", notes)
			}
			if got := strings.Contains(notes, "sharded over"); got != (tc.want != "") || !strings.Contains(notes, tc.want) {
				t.Errorf("want %q in the notes:\n%s", tc.want, notes)
			}
		})
	}
}
