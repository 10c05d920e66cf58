package core

import "github.com/memsh/memsh/sim/units"

// GRPO's generation phase with transformers' generate (vllm=None), before
// the step (Plan.LowerGeneration; replayed by replay's generationPass).
// TRL's GRPOTrainer (trl/trainer/grpo_trainer.py at 1.16.0,
// _generate_single_turn) calls unwrapped_model.generate under
// torch.no_grad(), gradient checkpointing disabled (trl/models/utils.py
// _unwrap_model_for_generation), once for the whole generation batch a
// process holds: per_device_train_batch_size x steps_per_generation
// prompts, left-padded (GRPOConfig.__post_init__: steps_per_generation
// defaults to gradient_accumulation_steps). transformers' _sample
// (transformers/generation/utils.py at 5.25.0) runs:
//
//   - the prefill (_prefill): one forward over the prompts, [G, prompt]
//     with G the generation batch and prompt Plan.Seq - completion, with
//     logits_to_keep = 1 (generate sets it when forward takes it), so
//     lm_head runs on hidden_states[:, -1:, :] alone: a view (its middle
//     dimension is 1, so matmul folds it without a copy); every attention
//     layer's DynamicCache takes torch.cat([empty, k]) and the same of v
//     (cache_utils.py DynamicLayer.update), copies the cache holds;
//   - per token: next_token_logits = outputs.logits[:, -1].to(copy=True,
//     dtype=float32), [G, V] fp32; the logits processors (none at TRL's
//     defaults: temperature 1.0, top_p 1.0, top_k 0, no min_p or
//     repetition penalty) return the same tensor; probs = softmax, [G, V]
//     fp32; torch.multinomial(probs, 1), whose one-sample path
//     (aten/src/ATen/native/Distributions.cpp multinomial) makes q =
//     empty_like(probs).exponential_() and argmaxes probs / q: a third
//     [G, V] fp32 tensor while it runs. The locals keep the step's
//     next_token_logits and probs until the next step reassigns them, so
//     a step's new ones are made while the last step's are alive; `del
//     outputs` drops the step's logits at the end of the step;
//   - a decode forward per token after the first over one new token a
//     row: each layer's cache.update runs self.keys = torch.cat([self.keys,
//     key_states], dim=-2), a new [G, kv_heads, t + 1, head_dim] tensor
//     made while the old one is alive, the old freed as it is rebound,
//     then the same for the values. The last forward (completion - 1
//     decode forwards: the last token sampled is never fed back) takes the
//     cache to seq - 1 tokens.
//
// memsh lowers the prefill as the plan's forward in eval (nothing saved)
// with use_cache, then the sampler, then the cache grown at once to seq -
// 2 tokens (each layer's keys and values made new while their old copies
// are alive, one at a time), then the last decode forward's growth to seq -
// 1 and its sampler: the phase's peak is at the prefill's layers or at the
// last forward's last layer, beside the weights and optimizer state. The
// decode forwards' own activations ([G, 1, hidden] a layer) and the
// caches' sizes between the prefill and the last two forwards are left
// out, as is the allocator's fragmentation from a thousand growing
// caches: allocated bytes, not reserved, are what this phase models.

// generation is LowerGeneration's setting on the plan copy it lowers: the
// completion tokens sampled after the prompt (0: a plan that does not
// generate).
type generation struct{ completion int64 }

// Generates reports whether the plan's step comes after transformers'
// generate in its own process: GRPO with vllm=None.
func (p *Plan) Generates() bool {
	pr := p.Preference
	return pr.GRPO() && pr.GRPOConfig.VLLM == "" && p.Phase == Train
}

// GenerationRows is the generation batch a process generates at once:
// per_device_train_batch_size x steps_per_generation (GRPOConfig's
// default: gradient_accumulation_steps), or generation_batch_size over
// the processes (every GPU of the layout: GRPO runs data parallelism
// alone).
func (p *Plan) GenerationRows() int64 {
	if n := p.Preference.GRPOConfig.GenerationBatchSize; n > 0 {
		return n / p.Parallel.GPUs()
	}
	steps := p.Preference.GRPOConfig.StepsPerGeneration
	if steps == 0 {
		steps = max(p.GradAccum, 1)
	}
	return p.Batch * steps
}

// LowerGeneration lowers the generation phase of a plan that Generates:
// the prefill over GenerationRows prompts of Seq - completion tokens, the
// sampler, the caches' growth to Seq - 1 tokens. The plan it returns is
// the copy it lowered (eval, no layout: the weights are whole on each GPU
// outside ZeRO-3).
func (p *Plan) LowerGeneration() (*Program, *Plan, error) {
	c := p.Preference.GRPOConfig.Completion
	gp := *p
	gp.Phase, gp.Validation, gp.Preference = Eval, false, nil
	gp.Batch, gp.Seq, gp.GradAccum = p.GenerationRows(), p.Seq-c, 1
	gp.UseCache, gp.KeepLogits = true, false
	gp.Checkpoint = Checkpoint{Mode: "none"} // gradient_checkpointing_disable for the generation
	gp.LossChunks, gp.FusedLoss = 0, ""
	gp.Parallel = Parallelism{}
	gp.generation = generation{completion: c}
	prog, err := gp.LowerProgram()
	if err != nil {
		return nil, nil, err
	}
	if len(prog.Tables) > 0 {
		return nil, nil, &units.Error{Path: "grpo", Msg: "the generation phase is not modelled for models with table() layers",
			Hint: `grpo(vllm="server") leaves the generation to other GPUs`}
	}
	return prog, &gp, nil
}

// lowerGeneration lowers generate's phase on the prompts' input_ids in
// (LowerGeneration's copy of the plan); its last op's output stands for
// the sequences generate returns.
func (b *Builder) lowerGeneration(m *Model, in Value) Value {
	caches := len(b.P.HeldForward)
	logits := m.lowerBody(b, in) // logits_to_keep = 1 before the head (lowerBody)
	cache := append([]Value(nil), b.P.HeldForward[caches:]...)
	b.P.HeldForward = b.P.HeldForward[:caches] // the cache lives as long as generate reads it (KeepAlive below)
	defer b.Scope("generate")()
	g, seq := b.Batch, b.Seq+b.gen.completion
	lastLogits, lastProbs, tokens := b.sample(logits, NoValue, NoValue)
	b.KeepAlive("del_outputs", logits)
	grow := func(to int64, why string) {
		if to <= b.Seq {
			return
		}
		for i, v := range cache {
			s := append([]int64(nil), b.Shape(v)...) // [G, tokens, kv_heads x head_dim]
			s[len(s)-2] = to
			cache[i] = b.Ew("cat", "cache_update", []Value{v}, s, b.Dtype(v), why)
		}
	}
	grow(seq-2, "a layer's keys or values in the DynamicCache at the last decode forward but one: torch.cat([self.keys, key_states], dim=-2), the old tensor alive until rebound")
	grow(seq-1, "a layer's keys or values in the DynamicCache at the last decode forward (seq - 1 tokens: the last token sampled is never fed back)")
	if seq-1 > b.Seq { // the last decode forward's logits and sampler
		i := b.AddOp("linear", "decode_logits", []Value{cache[len(cache)-1]})
		d := b.Out(i, "decode_logits", []int64{g, 1, b.Shape(logits)[len(b.Shape(logits))-1]}, b.Dtype(logits), "the last decode forward's logits, [G, 1, V] (logits_to_keep = 1), held by outputs until del outputs")
		b.Op(i).Bytes = float64(b.Val(d).Bytes)
		lastLogits, lastProbs, tokens = b.sample(d, lastLogits, lastProbs)
		b.KeepAlive("del_outputs", d)
	}
	b.KeepAlive("generate_returns", append(cache, lastLogits, lastProbs)...)
	return tokens
}

// sample lowers one step's sampler on its logits ([G, 1, V]) with the
// last step's next_token_logits and probs (NoValue at the prefill), which
// the locals keep until this step's are made: the fp32 copy, softmax and
// multinomial's exponential draws. It returns this step's
// next_token_logits, probs and tokens.
func (b *Builder) sample(logits, lastLogits, lastProbs Value) (Value, Value, Value) {
	s := b.Shape(logits)
	gv := []int64{s[0], s[len(s)-1]}
	i := b.AddOp("cast", "next_token_logits", []Value{logits})
	ntl := b.Out(i, "next_token_logits", gv, units.FP32, "outputs.logits[:, -1].to(copy=True, dtype=float32): [G, V], the logits processors' scores (none at TRL's defaults)")
	b.Op(i).Bytes = float64(b.Val(logits).Bytes + b.Val(ntl).Bytes)
	if lastLogits != NoValue {
		b.KeepAlive("next_token_logits_rebound", lastLogits)
	}
	probs := b.Ew("softmax", "probs", []Value{ntl}, gv, units.FP32, "nn.functional.softmax(next_token_scores, dim=-1): [G, V] fp32")
	if lastProbs != NoValue {
		b.KeepAlive("probs_rebound", lastProbs)
	}
	j := b.AddOp("multinomial", "multinomial", []Value{probs})
	b.Op(j).WorkF = units.FP32.Bytes(gv[0] * gv[1]) // q = empty_like(probs).exponential_(): the one-sample path
	tokens := b.Out(j, "next_tokens", []int64{gv[0]}, units.INT64, "torch.multinomial(probs, num_samples=1).squeeze(1)")
	b.Op(j).Bytes = float64(3 * b.Val(probs).Bytes)
	return ntl, probs, tokens
}

// GenerationReplayed reports whether the step replays its generation
// phase: Generates, on one GPU, DDP, ZeRO-1 and 2 (the weights whole on
// each GPU) and ZeRO-3 (TRL gathers every weight of the policy for the
// generation: unwrap_model_for_generation with ds3_gather_for_generation,
// replay's gatherForGeneration), without quantized weights there and
// unless ds3_gather_for_generation is False (GRPOConfig.NoDS3Gather:
// generate's forwards gather a module at a time through ZeRO-3's hooks). Under
// FSDP2 generate's forwards gather a unit at a time as the training
// forward does, FSDP1 summons the root's parameters, offload moves the
// weights: not replayed there (sim's note says what it leaves out).
func (p *Plan) GenerationReplayed() bool {
	par := p.Parallel.Norm()
	z3 := par.Zero >= 3
	return p.Generates() && !par.FSDP && (!z3 || p.Quant == "" && !p.Preference.GRPOConfig.NoDS3Gather) && p.Offload == nil && p.PipeStage == nil
}
