package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
)

// grpoBuiltin is grpo(): TRL's GRPOTrainer.
var grpoBuiltin = host.Builtin{
	Name: "grpo",
	Sig:  `grpo(completion=512, beta=0.0, vllm=None, vllm_memory=None, sleep=False, trl=None, steps_per_generation=None, generation_batch_size=None, ds3_gather=True)`,
	Doc: "TRL's GRPOTrainer's training step as the step's objective, for train(..., preference=grpo(...)) (docs/grpo.md): batch= counts completions " +
		"(per_device_train_batch_size), seq their prompt and completion padded together (the longest prompt of the batch, left-padded, and max_completion_length). " +
		"The policy's forward over each row, then TRL's fused LM head (add_fused_lm_head, TRL 1.15 and later, 1.16.0 read) on the last completion= positions alone: " +
		"their hidden states copied, their log-probabilities and entropy computed in tiles of the vocabulary, never the logits; the loss on [rows, completion] tensors, the backward. " +
		"completion: max_completion_length (GRPOConfig's default 512). beta: the KL coefficient; 0 (the default) runs no reference model, beta > 0 the policy with its LoRA adapters " +
		"disabled under lora= (nothing more in memory), else a second copy of the model, frozen (in params; no op of the step reads it: the reference's log-probabilities " +
		"come with the batch, computed when it was generated). vllm: None (transformers' generate in the training process before the step: replayed in phase \"generation\" on one GPU, DDP, ZeRO-1/2 and ZeRO-3 (the whole policy gathered, ds3_gather_for_generation) " +
		"(the prefill over batch x steps_per_generation prompts of seq - completion tokens, the KV cache grown to seq - 1 tokens, the sampler's fp32 [rows, vocabulary] tensors), " +
		"not replayed under FSDP, offload or ZeRO-3 with ds3_gather=False (r.notes gives its KV cache)), " +
		"\"colocate\" (vLLM in each training process: vllm_memory of the GPU's total memory stays allocated through the step, a row of r.overheads named vllm, unless sleep=True, " +
		"vllm_enable_sleep_mode, which discards its weights and KV cache after each generation) or \"server\" (trl vllm-serve on GPUs of its own: nothing on these). " +
		"vllm_memory: vllm_gpu_memory_utilization, None is TRL's 0.3 (colocate only). steps_per_generation: the micro-batches one generation makes, None is grad_accum (GRPOConfig's default). generation_batch_size: the prompts of one generation over every process, None: batch x processes x steps_per_generation (one of the two). ds3_gather: ds3_gather_for_generation (ZeRO-3 only). trl: \"1.15\" (the default: TRL 1.15 and later), \"1.10\" (TRL 1.10 to 1.13) or " +
		"\"1.8\" (TRL 1.8 and 1.9, Axolotl's pin): the model's logits of the last completion+1 positions (logits_to_keep), divided by the temperature into a copy (1.10) " +
		"or in place (1.8), a log_softmax per row, saved, and the entropy of the logits under no_grad (1.8 copies them to flatten them); 1.14 is refused. memsh scores every completion position (TRL masks the completion's padding): an upper bound. " +
		"One GPU or data parallelism (ddp, zero 1, 2 or 3, FSDP2; a reference copy not under FSDP1); tensor, pipeline, context and expert parallelism, packing, compile and loss_chunks are refused.",
	Fn: grpoFn,
}

// grpoHint is the hint of grpo()'s errors that carry none of their own
// (a wrong type, an unknown keyword): each keyword's type and an example.
const grpoHint = `completion, steps_per_generation and generation_batch_size are ints, beta and vllm_memory numbers, vllm None, "colocate" or "server", sleep and ds3_gather bools, trl None, "1.15", "1.10" or "1.8": ` +
	`grpo(completion=1024, beta=0.04, vllm="colocate", vllm_memory=0.3, sleep=False) (docs/grpo.md)`

func grpoFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := grpoValue(b, args, kwargs)
	if err != nil {
		return nil, host.WithHint(err, grpoHint)
	}
	return v, nil
}

// grpoValue is grpo()'s objective, or why the call cannot make one.
func grpoValue(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var vllm, mem, trlV, steps, gbs starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None, starlark.None
	gather := true
	var beta starlark.Value = starlark.Float(0)
	g := core.GRPOConfig{Completion: 512}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "completion?", &g.Completion, "beta?", &beta, "vllm?", &vllm,
		"vllm_memory?", &mem, "sleep?", &g.Sleep, "trl?", &trlV, "steps_per_generation?", &steps, "generation_batch_size?", &gbs, "ds3_gather?", &gather); err != nil {
		return nil, err
	}
	if steps != starlark.None {
		n, err := starlark.AsInt32(steps)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: steps_per_generation must be None or an int, 1 or more (got %s)", b.Name(), steps.String())
		}
		g.StepsPerGeneration = int64(n)
	}
	if gbs != starlark.None {
		n, err := starlark.AsInt32(gbs)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: generation_batch_size must be None or an int, 1 or more (got %s)", b.Name(), gbs.String())
		}
		g.GenerationBatchSize = int64(n)
	}
	g.NoDS3Gather = !gather
	f, ok := starlark.AsFloat(beta)
	if !ok {
		return nil, fmt.Errorf("%s: beta must be a number (got %s)", b.Name(), beta.Type())
	}
	g.Beta = f
	switch v := vllm.(type) {
	case starlark.NoneType:
	case starlark.String:
		g.VLLM = string(v)
	default:
		return nil, fmt.Errorf("%s: vllm must be None, %q or %q (got %s)", b.Name(), core.VLLMColocate, core.VLLMServer, vllm.Type())
	}
	switch v := mem.(type) {
	case starlark.NoneType:
		if g.VLLM == core.VLLMColocate {
			g.VLLMMemory = core.GRPOVLLMMemory
		}
	default:
		f, ok := starlark.AsFloat(v)
		if !ok {
			return nil, fmt.Errorf("%s: vllm_memory must be None or a number (got %s)", b.Name(), mem.Type())
		}
		g.VLLMMemory = f
	}
	p := core.Preference{Trainer: core.TrainerTRL, Loss: core.LossGRPO, GRPOConfig: g, Reference: core.RefOfGRPO(g.Beta, nil)}
	switch t := trlV.(type) {
	case starlark.NoneType:
		p.TRL = core.TRLFusedHead
	case starlark.String:
		p.TRL = string(t)
	default:
		return nil, fmt.Errorf("%s: trl must be None, %q, %q or %q (got %s)", b.Name(), core.TRLFusedHead, core.TRLLogitsDiv, core.TRLLogits, trlV.Type())
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.Reference = "" // resolved against the plan's LoRA by train() (setPreference)
	return Preference{p}, nil
}

var grpoAttrNames = []string{"beta", "completion", "ds3_gather", "generation_batch_size", "reference", "sleep", "steps_per_generation", "trl", "vllm", "vllm_memory"}

// grpoString is grpo(...)'s call: every setting, so that it evaluates to
// an equal value (core.Preference.GRPOCall, which advise writes too).
func (x Preference) grpoString() string { return x.p.GRPOCall() }

// grpoAttr is grpo(...)'s attribute name: its settings, and the reference
// it runs (None until train() has the plan's LoRA).
func (x Preference) grpoAttr(name string) (starlark.Value, error) {
	g := x.p.GRPOConfig
	switch name {
	case "beta":
		return starlark.Float(g.Beta), nil
	case "completion":
		return starlark.MakeInt64(g.Completion), nil
	case "ds3_gather":
		return starlark.Bool(!g.NoDS3Gather), nil
	case "generation_batch_size":
		if g.GenerationBatchSize == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt64(g.GenerationBatchSize), nil
	case "reference":
		if x.p.Reference == "" {
			return starlark.None, nil
		}
		return starlark.String(x.p.Reference), nil
	case "sleep":
		return starlark.Bool(g.Sleep), nil
	case "steps_per_generation":
		if g.StepsPerGeneration == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt64(g.StepsPerGeneration), nil
	case "trl":
		return starlark.String(x.p.TRL), nil
	case "vllm":
		if g.VLLM == "" {
			return starlark.None, nil
		}
		return starlark.String(g.VLLM), nil
	case "vllm_memory":
		if g.VLLM != core.VLLMColocate {
			return starlark.None, nil
		}
		return starlark.Float(g.VLLMMemory), nil
	}
	return nil, nil
}
