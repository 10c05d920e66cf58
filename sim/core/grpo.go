package core

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// A GRPO step as TRL's GRPOTrainer runs it (Preference.Loss LossGRPO;
// trl/trainer/grpo_trainer.py _compute_loss and
// _get_per_token_logps_and_entropies at TRL 1.15.0 and 1.16.0, where the
// trainer patches the policy with add_fused_lm_head(outputs=("log_probs",
// "entropy"); TRL 1.8 to 1.13 made the logits of the completion tokens
// instead, grpo_logits.go; 1.14's fused log-softmax kernel is refused):
//
//   - the batch is per_device_train_batch_size completions (Plan.Batch
//     rows), each its prompt and its completion concatenated (torch.cat:
//     input_ids [rows, Plan.Seq]), generated before the step (transformers'
//     generate or vLLM) and buffered by _prepare_inputs;
//   - labels = input_ids.masked_fill(attention_mask == 0, -100) with every
//     position before the last logits_to_keep = max_completion_length set to
//     -100: only the completion tokens are scored, so the fused head copies
//     rows x completion hidden states (hidden_states[mask]) and computes
//     their log-probabilities and entropy in tiles, never the logits
//     (trl_fused_head.go);
//   - the loss is arithmetic on [rows, completion] tensors (the importance
//     ratio against old_per_token_logps, its clipping, the KL term against
//     ref_per_token_logps when beta != 0, the masked means): kilobytes;
//   - the reference model's and the old policy's log-probabilities are
//     computed in _generate_and_score_completions, before the step, under
//     torch.no_grad(), and come with the batch. With beta = 0 (GRPOConfig's
//     default at 1.16.0) there is no reference; with beta != 0 it is the
//     policy with its adapters disabled under PEFT, else a second copy of
//     the model (GRPOTrainer.__init__ loads ref_model with the policy's
//     model_init_kwargs), whose weights the step holds but never reads.
//
// The generation itself runs between the steps and is not replayed: under
// vLLM in colocate mode the engine's memory, vllm_gpu_memory_utilization of
// the GPU's total (vllm/v1/worker/gpu_worker.py init_device:
// requested_memory = total_memory x gpu_memory_utilization; its weights,
// KV cache and profiled activations), stays allocated through the step
// unless vllm_enable_sleep_mode puts it to sleep (trl/generation/
// vllm_generation.py: llm.sleep(level=2) after each generation, which
// discards the weights and the KV cache): replay's VLLMOverheads.

// LossGRPO marks Preference as TRL's GRPOTrainer (Preference.GRPOConfig holds
// its settings).
const LossGRPO = "grpo"

// The vLLM modes of GRPOConfig.vllm_mode (use_vllm=True).
const (
	// VLLMColocate: the engine runs in each training process, on its GPU.
	VLLMColocate = "colocate"
	// VLLMServer: the engine runs on GPUs of its own (trl vllm-serve): none
	// of its memory is on the training GPUs.
	VLLMServer = "server"
)

// GRPOVLLMMemory is GRPOConfig.vllm_gpu_memory_utilization's default
// (trl/trainer/grpo_config.py at 1.16.0: 0.3).
const GRPOVLLMMemory = 0.3

// GRPOConfig is a GRPO step's settings: TRL's GRPOConfig's, as they reach
// the step's memory.
type GRPOConfig struct {
	// Completion: max_completion_length, the tokens of each row the loss
	// scores: the last Completion positions of Plan.Seq (prompt and
	// completion padded to their longest).
	Completion int64
	// Beta: the KL coefficient; 0 runs no reference model.
	Beta float64
	// VLLM: "" (transformers' generate in the training process, between
	// steps), VLLMColocate or VLLMServer.
	VLLM string
	// VLLMMemory: vllm_gpu_memory_utilization, the fraction of the GPU's
	// total memory the colocated engine takes (0 under another mode).
	VLLMMemory float64
	// Sleep: vllm_enable_sleep_mode: the colocated engine sleeps (level 2)
	// between generations and holds nothing through the step.
	Sleep bool
	// StepsPerGeneration: steps_per_generation, the micro-batches one
	// generation makes (the generation batch is Plan.Batch x this many
	// rows a process, generation.go); 0 is GRPOConfig's default,
	// gradient_accumulation_steps (Plan.GradAccum).
	StepsPerGeneration int64
	// GenerationBatchSize: generation_batch_size, the prompts of one
	// generation over every process (per_device_train_batch_size x
	// processes x steps_per_generation, GRPOConfig.__post_init__); 0 when
	// unset. At most one of it and StepsPerGeneration is set, as
	// GRPOConfig requires.
	GenerationBatchSize int64
	// NoDS3Gather: ds3_gather_for_generation=False: under ZeRO-3 the
	// generation runs through ZeRO-3's module hooks, a module gathered at a
	// time, instead of the whole policy gathered (not replayed then:
	// Plan.GenerationReplayed).
	NoDS3Gather bool
}

// GRPO reports whether pr is TRL's GRPOTrainer.
func (pr *Preference) GRPO() bool { return pr != nil && pr.Loss == LossGRPO }

// RefOfGRPO is the reference a GRPO step keeps: none with beta = 0,
// else as DPOTrainer's (RefOf).
func RefOfGRPO(beta float64, lora *LoRA) string {
	if beta == 0 {
		return RefNone
	}
	return RefOf(lora)
}

// validateGRPO checks a GRPO objective's own settings.
func (pr *Preference) validateGRPO() error {
	g := pr.GRPOConfig
	err := func(msg, hint string) error { return &units.Error{Path: "grpo", Msg: msg, Hint: hint} }
	switch {
	case pr.trainer() != TrainerTRL:
		return err(fmt.Sprintf("trainer %q: memsh replays TRL's GRPOTrainer", pr.Trainer), "drop trainer=")
	case pr.TRL == "1.14":
		return err(`trl="1.14": GRPOTrainer of TRL 1.14 (selective_log_softmax_and_entropy's fused Triton kernel over the logits) is not modelled`,
			grpoTRLHint)
	case pr.TRL != TRLFusedHead && pr.TRL != TRLLogits && pr.TRL != TRLLogitsDiv:
		return err(fmt.Sprintf("unknown trl %q", pr.TRL), grpoTRLHint)
	case g.Completion < 1:
		return err(fmt.Sprintf("completion must be at least 1 (got %d)", g.Completion), "completion is max_completion_length, the tokens each row scores (GRPOConfig's default 512)")
	case !(g.Beta >= 0) || math.IsInf(g.Beta, 1): // NaN fails the first
		return err(fmt.Sprintf("beta must be a finite number, 0 or more (got %g)", g.Beta), "beta is the KL coefficient (GRPOConfig's default 0, which runs no reference model; TRL's docs use 0.001 to 0.04)")
	case g.GenerationBatchSize < 0:
		return err(fmt.Sprintf("generation_batch_size must be at least 1 (got %d)", g.GenerationBatchSize), "generation_batch_size is the prompts of one generation over every process (None: per_device_train_batch_size x processes x steps_per_generation)")
	case g.GenerationBatchSize > 0 && g.StepsPerGeneration > 0:
		return err("generation_batch_size and steps_per_generation are both set", "GRPOConfig takes one of them (trl/trainer/grpo_config.py __post_init__): drop one")
	case g.StepsPerGeneration < 0:
		return err(fmt.Sprintf("steps_per_generation must be at least 1 (got %d)", g.StepsPerGeneration), "steps_per_generation is the micro-batches one generation makes (None: gradient_accumulation_steps, GRPOConfig's default)")
	case g.VLLM != "" && g.VLLM != VLLMColocate && g.VLLM != VLLMServer:
		return err(fmt.Sprintf("unknown vllm %q", g.VLLM), fmt.Sprintf("vllm is None (transformers' generate), %q or %q", VLLMColocate, VLLMServer))
	case g.VLLM != VLLMColocate && (g.VLLMMemory != 0 || g.Sleep):
		return err("vllm_memory and sleep set the colocated vLLM engine, and vllm is not \"colocate\"", `vllm="colocate", or drop vllm_memory and sleep`)
	case g.VLLM == VLLMColocate && !(g.VLLMMemory > 0 && g.VLLMMemory < 1):
		return err(fmt.Sprintf("vllm_memory must be above 0 and below 1 (got %g)", g.VLLMMemory), "vllm_memory is vllm_gpu_memory_utilization, the fraction of the GPU's memory the engine takes (0.3 by default)")
	}
	switch pr.Reference {
	case RefNone, RefModel, RefAdapters:
	default:
		return err(fmt.Sprintf("reference %q: GRPOTrainer scores its reference before the step", pr.Reference),
			"beta=0 runs none; beta > 0 the policy with its adapters disabled under lora=, else a copy")
	}
	if (pr.Reference == RefNone) != (g.Beta == 0) {
		return err(fmt.Sprintf("reference %q with beta %g", pr.Reference, g.Beta), "beta picks the reference: none with 0, else a copy or the adapters disabled")
	}
	return nil
}

// grpoTRLHint names the TRL releases grpo(trl=) models.
const grpoTRLHint = `trl is "1.15" (TRL 1.15 and later: the fused LM head), "1.10" (1.10 to 1.13: the logits, divided by the temperature into a copy) or "1.8" (1.8 and 1.9: the logits, divided in place); 1.14's fused log-softmax kernel is not modelled`

// validatePlanGRPO checks a plan with a GRPO objective, beyond what every
// preference objective needs (validatePreference).
func (p *Plan) validatePlanGRPO() error {
	pr, par := p.Preference, p.Parallel.Norm()
	switch {
	case pr.GRPOConfig.Completion >= p.Seq:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("preference=grpo() scores the last %d tokens of each row, and seq is %d: no prompt is left", pr.GRPOConfig.Completion, p.Seq),
			Hint: "seq counts the prompt and the completion: the batch's longest prompt plus max_completion_length"}
	case pr.GRPOConfig.GenerationBatchSize%(p.Batch*par.GPUs()) != 0:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("preference=grpo(generation_batch_size=%d) is not a multiple of the global batch: batch %d x %s", pr.GRPOConfig.GenerationBatchSize, p.Batch, units.Count(par.GPUs(), "process")),
			Hint: "GRPOConfig requires it (trl/trainer/grpo_config.py __post_init__): generation_batch_size = per_device_train_batch_size x processes x steps_per_generation"}
	case par.FSDP && par.FSDPVersion == 1 && pr.Reference == RefModel:
		return &units.Error{Path: "train", Msg: "preference=grpo() with a reference copy under FSDP1 is not modelled",
			Hint: "use FSDP2 (parallel(fsdp=True)), ddp or parallel(zero=...), or beta=0"}
	}
	return nil
}

// grpoLoss lowers GRPOTrainer._compute_loss on in, the batch's input_ids.
func (b *Builder) grpoLoss(m *Model, in Value) Value {
	pr := b.pref
	x := m.lowerBody(b, in) // the last hidden states (the fused head runs below), or the logits (grpo_logits.go)
	var ins []Value
	if pr.Logits() {
		lp, ent := b.grpoLogitsLogProbs(in, x)
		ins = []Value{lp, ent}
	} else {
		lp, mask, more := b.trlFusedLogProbs(m, x, trlOutputs{entropy: true, scored: pr.GRPOConfig.Completion})
		ins = append([]Value{lp, mask}, more...)
	}
	if pr.Reference == RefModel {
		b.referenceCopy()
	}
	defer b.Scope("loss")()
	scored := []int64{b.Batch, pr.GRPOConfig.Completion}
	batch := func(name, why string) {
		v := b.input(name, scored, units.FP32)
		b.Val(v).Why = why
		ins = append(ins, v)
	}
	if pr.GRPOConfig.VLLM != "" { // computed for vLLM's importance sampling whatever num_iterations
		batch("old_per_token_logps", "the policy's log-probabilities before the update, computed under no_grad when the batch was generated (vLLM's importance sampling)")
	}
	if pr.Reference != RefNone {
		batch("ref_per_token_logps", "the reference's log-probabilities, computed under no_grad when the batch was generated (beta != 0)")
	}
	i := b.AddOp(GRPOLossOp, "grpo_loss", ins)
	// Like DPO's loss (dpo.go): its arithmetic is on [rows, completion]
	// tensors, and the gradient it hands the log-probabilities is as small.
	b.Op(i).NoGradB = true
	return b.Out(i, "loss", nil, units.FP32, "the GRPO loss: the clipped importance-weighted advantages of the completion tokens (and beta x their KL to the reference), averaged")
}

// GRPOLossOp is the op kind of GRPO's loss arithmetic.
const GRPOLossOp = "grpo_loss"

// referenceCopy registers GRPO's reference copy of the model: every
// parameter of the policy again, frozen, under ref_model. No op of the
// step reads it (Program.markUnread), so sharding leaves it sharded.
func (b *Builder) referenceCopy() {
	n := int32(len(b.P.Params))
	for pi := range n {
		c := b.P.Params[pi]
		c.Name = RefCopy + "." + c.Name
		c.Shape = append([]int64(nil), c.Shape...)
		c.Trainable, c.Reference = false, true
		if c.TiedTo >= 0 {
			c.TiedTo += n
		}
		b.P.Params = append(b.P.Params, c)
	}
}

// GRPOCall is the grpo(...) call that makes pr, every setting written
// (the builtin's value prints it; advise writes it): completion, beta,
// vllm, under "colocate" vllm_memory and sleep, steps_per_generation,
// generation_batch_size and ds3_gather when set, trl.
func (pr *Preference) GRPOCall() string {
	g := pr.GRPOConfig
	s := fmt.Sprintf("grpo(completion=%d, beta=%s", g.Completion, pyFloat(g.Beta))
	if g.VLLM != "" {
		s += fmt.Sprintf(", vllm=%q", g.VLLM)
	}
	if g.VLLM == VLLMColocate {
		sleep := "False"
		if g.Sleep {
			sleep = "True"
		}
		s += fmt.Sprintf(", vllm_memory=%s, sleep=%s", pyFloat(g.VLLMMemory), sleep)
	}
	if g.StepsPerGeneration > 0 {
		s += fmt.Sprintf(", steps_per_generation=%d", g.StepsPerGeneration)
	}
	if g.GenerationBatchSize > 0 {
		s += fmt.Sprintf(", generation_batch_size=%d", g.GenerationBatchSize)
	}
	if g.NoDS3Gather {
		s += ", ds3_gather=False"
	}
	return s + fmt.Sprintf(", trl=%q)", pr.TRL)
}

// pyFloat writes f as Python (and Starlark) print a float: the shortest
// digits that read back, with ".0" when they are a whole number.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eInfNa") {
		s += ".0"
	}
	return s
}
