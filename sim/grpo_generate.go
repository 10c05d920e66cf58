package sim

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
)

// generateKV is the KV cache transformers' generate holds at the end of a
// GRPO step's generation (vllm=None), as the plan's note states it (the
// phase itself is replayed where Plan.GenerationReplayed, replay's
// generation.go, and only noted otherwise): TRL's
// GRPOTrainer (1.8.0 and 1.16.0 _generate_single_turn) calls
// unwrapped_model.generate under torch.no_grad() once for the whole
// generation batch a process holds, per_device_train_batch_size x
// steps_per_generation completions (GRPOConfig.__post_init__: steps_per_
// generation defaults to gradient_accumulation_steps), and its
// DynamicCache keeps every attention layer's keys and values for each
// prompt and completion token. rows is that batch (Plan.Batch x
// Plan.GradAccum), bytes the cache's at Plan.Seq tokens a row; ok is false
// when the model has no layer whose cache memsh lowers (nn/kv_cache.go:
// transformers' attention), or when the model does not lower for one
// token.
type generateKV struct {
	rows, bytes int64
	ok          bool
}

// generationKV lowers plan's model once over one token with use_cache, in
// eval and without checkpointing or a layout, and scales the cache's
// copies it finds (each layer's cache_keys and cache_values) to the
// generation batch's rows and tokens a row: an upper bound where a layer keeps
// a sliding window of the tokens only (transformers'
// DynamicSlidingWindowLayer), which the lowering does not tell apart.
func generationKV(plan *core.Plan, tokens int64) generateKV {
	p := *plan
	p.Preference, p.UseCache, p.KeepLogits = nil, true, false
	p.Batch, p.Seq, p.GradAccum = 1, 1, 1
	p.Checkpoint = core.Checkpoint{Mode: "none"}
	p.Parallel = core.Parallelism{}
	p.Phase = core.Eval
	prog, err := p.LowerProgram()
	if err != nil {
		return generateKV{}
	}
	var perToken int64
	for _, v := range prog.Values {
		if strings.HasSuffix(v.Name, ".cache_keys") || strings.HasSuffix(v.Name, ".cache_values") {
			perToken += v.Bytes
		}
	}
	rows := plan.GenerationRows()
	return generateKV{rows: rows, bytes: perToken * rows * tokens, ok: perToken > 0}
}
