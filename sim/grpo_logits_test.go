package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// grpoLogitsPlan is grpo_live.py's model and rows (ktoLivePlan's Llama of
// hidden 64, 2 layers, V = 1,000, bf16): 2 rows of 12 tokens, the last 8
// the completion, GRPOTrainer at the TRL release trl.
func grpoLogitsPlan(trl string) *core.Plan {
	p := ktoLivePlan()
	p.Seq = 12
	p.Preference = &core.Preference{Trainer: core.TrainerTRL, TRL: trl, Loss: core.LossGRPO, Reference: core.RefNone,
		GRPOConfig: core.GRPOConfig{Completion: 8}}
	return p
}

// TestGRPOLiveAsTRL holds memsh's replay of GRPOTrainer's logits path to
// what the same steps allocate on the CPU (torch 2.15, transformers 5.25:
// `/work/venv-t/bin/python tools/oracle/grpo_live.py`), the tensors of at
// least one row's completion logits ([8, 1,000] bf16, 16,000 bytes) whose
// last dimension is the vocabulary, summed after each op. Forward, at
// both releases, 196,000 bytes in entropy_from_logits' multiply: the
// logits [2, 9, 1,000] 36,000, the two rows' saved log_softmax [8, 1,000]
// 16,000 each, and 32,000 more, 1.8's flattened copy of the divided view
// (entropy's reshape) or 1.10's quotient (logits / temperature), then the
// chunk's log_softmax, exp and product [16, 1,000] 32,000 each. Backward,
// 1.8: 100,000 in CopySlices' division (the logits' gradient from
// new_empty_strided 36,000, the slice's gradient cloned and divided,
// 32,000 each). 1.10: 68,000 in the oracle (the quotient's gradient and
// the logits' from SliceBackward0), 80,000 in memsh, which makes the
// quotient's whole gradient at the first row's log_softmax backward, while
// both rows' saved log_softmax and that row's gradient are live, where
// PyTorch stacks the rows' gradients once every row is done
// (trl_logits.go): an upper bound by one row's log_softmax and gradient.
func TestGRPOLiveAsTRL(t *testing.T) {
	for _, c := range []struct {
		trl          string
		fwd, bwd     int64
		fwdAt, bwdAt string
	}{
		{core.TRLLogits, 196_000, 100_000, "entropy.entropy_from_logits", "temperature_"},
		{core.TRLLogitsDiv, 196_000, 80_000, "entropy.entropy_from_logits", "selective_log_softmax.log_softmax_1"},
	} {
		p := grpoLogitsPlan(c.trl)
		if peak, at := vocabLive(t, p, false); peak != c.fwd || at != c.fwdAt {
			t.Errorf("trl=%q: the forward's vocabulary-sized tensors peak at %d bytes in %s, want %d in %s", c.trl, peak, at, c.fwd, c.fwdAt)
		}
		if peak, at := vocabLiveBackward(t, p); peak != c.bwd || at != c.bwdAt {
			t.Errorf("trl=%q: the backward's vocabulary-sized tensors peak at %d bytes in %s, want %d in %s", c.trl, peak, at, c.bwd, c.bwdAt)
		}
	}
}

// vocabLiveBackward is vocabLive's sum over the backward, the parameters'
// gradients and the optimizer's temporaries left out as the oracle leaves
// out tensors whose last dimension is not the vocabulary; the saved
// tensors live at the backward's start count from there.
func vocabLiveBackward(t *testing.T, p *core.Plan) (int64, string) {
	t.Helper()
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const rowBytes = 16_000
	var sum, peak int64
	at := ""
	live := map[string]int64{}
	for _, e := range r.Trace.SteadyEvents() {
		if e.Size < rowBytes || strings.HasSuffix(e.Tensor, ".weight.grad") || e.Op == "optimizer.step" {
			continue
		}
		switch e.Action {
		case "alloc":
			live[e.Tensor] += e.Size
			if e.Phase == replay.PhaseBackward {
				sum += e.Size
			}
		case "free_completed":
			live[e.Tensor] -= e.Size
			if e.Phase == replay.PhaseBackward {
				sum -= e.Size
			}
		}
		if e.Phase == replay.PhaseBackward && sum > peak {
			peak, at = sum, e.Op
		}
		if e.Phase == replay.PhaseForward {
			sum = 0
			for _, n := range live {
				sum += n
			}
		}
	}
	return peak, at
}

// TestGRPOGenerationKV: r.notes gives the KV cache transformers' generate
// ends with: Llama 3 8B's 32 layers x keys and values x 8 key-value heads
// x 128 x bf16 = 131,072 bytes a token, for batch x steps_per_generation
// completions (grad_accum by default). Replayed (phase generation) on one
// GPU and under ZeRO-3 (with the whole policy gathered), where the last
// decode forward takes it to seq - 1 tokens; not replayed under FSDP2
// (zero -1 here: the note gives it at seq tokens); none is named
// under vLLM, whose engine generates. LoRA, so that the optimizer's step
// is small.
func TestGRPOGenerationKV(t *testing.T) {
	for _, c := range []struct {
		accum, steps int64
		zero         int
		vllm         string
		want, phase  string
	}{
		{1, 0, 0, "", "the KV cache grown to 1535 tokens (1.50 GiB)", "step"}, // 131,072 x 8 x 1,535
		{4, 0, 0, "", "generation batch's 32 prompts (per_device_train_batch_size x steps_per_generation) of 512 prompt tokens, the KV cache grown to 1535 tokens (6.00 GiB)", "step"},
		{1, 16, 0, "", "generation batch's 128 prompts", "generation"}, // 24 GiB of cache and the weights, over the step's peak
		{16, 0, 0, "", "generation batch's 128 prompts", "generation"},
		{4, 0, 3, "", "the KV cache grown to 1535 tokens (6.00 GiB), the sampler's fp32 [rows, vocabulary] tensors, beside the weights and optimizer state, without gradients; under ZeRO-3 every weight of the policy gathered whole for it (unwrap_model_for_generation's deepspeed.zero.GatheredParameters, ds3_gather_for_generation's default): 14.98 GiB on each GPU", "generation"},
		{4, 0, -1, "", "not replayed: its KV cache ends at 6.00 GiB for the generation batch's 32 completions of 1536 tokens", "step"}, // FSDP2
		{1, 0, 0, core.VLLMServer, "", "step"},
	} {
		m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "flash")
		p := testmodels.LlamaPlan(m, 8, 1536, "bf16", "full", "H100-80GB")
		p.GradAccum = c.accum
		p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"q", "k", "v", "o"}}
		switch {
		case c.zero > 0:
			p.Parallel = core.Parallelism{DP: 8, Zero: c.zero}
		case c.zero < 0:
			p.Parallel = core.Parallelism{DP: 8, FSDP: true}
		}
		p.Preference = &core.Preference{Trainer: core.TrainerTRL, TRL: core.TRLFusedHead, Loss: core.LossGRPO, Reference: core.RefNone,
			GRPOConfig: core.GRPOConfig{Completion: 1024, VLLM: c.vllm, StepsPerGeneration: c.steps}}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		note := strings.Join(r.Notes, "\n")
		if got := strings.Contains(note, "KV cache"); got != (c.want != "") || !strings.Contains(note, c.want) {
			t.Errorf("accum %d, steps %d, zero %d, vllm %q: notes %q, want %q", c.accum, c.steps, c.zero, c.vllm, note, c.want)
		}
		if got := r.PeakAt.Phase.String(); (got == "generation") != (c.phase == "generation") {
			t.Errorf("accum %d, steps %d, zero %d, vllm %q: peak in %s, want %s", c.accum, c.steps, c.zero, c.vllm, got, c.phase)
		}
	}
}

// With ds3_gather_for_generation False ZeRO-3's generation gathers a
// module at a time through its hooks: not replayed, and the note says so.
func TestGRPOGenerationNoDS3Gather(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "flash")
	p := testmodels.LlamaPlan(m, 8, 1536, "bf16", "full", "H100-80GB")
	p.GradAccum = 4
	p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"q", "k", "v", "o"}}
	p.Parallel = core.Parallelism{DP: 8, Zero: 3}
	p.Preference = &core.Preference{Trainer: core.TrainerTRL, TRL: core.TRLFusedHead, Loss: core.LossGRPO, Reference: core.RefNone,
		GRPOConfig: core.GRPOConfig{Completion: 1024, NoDS3Gather: true}}
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	note := strings.Join(r.Notes, "\n")
	if want := "not replayed: its KV cache ends at 6.00 GiB"; !strings.Contains(note, want) || !strings.Contains(note, "ds3_gather_for_generation False") {
		t.Errorf("notes %q, want %q and ds3_gather_for_generation False", note, want)
	}
	if r.PeakAt.Phase.String() == "generation" {
		t.Error("the generation replayed with ds3_gather_for_generation False")
	}
}
