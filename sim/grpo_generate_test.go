package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestGRPOGenerateAsTransformers holds memsh's generation phase (GRPO,
// vllm=None: core/generation.go) to transformers' generate on the CPU,
// tools/oracle/grpo_generate_live.py (torch 2.15.0, transformers 5.25.0: a
// tiny LlamaForCausalLM in bf16, 2 layers, 4 heads of 16, 2 key-value
// heads, 8 prompts of 8 tokens, TRL 1.16's GenerationConfig). At
// generate's peak the oracle's live tensors are the DynamicCache's keys
// and values (made by torch.cat), the vocabulary-sized ones (the logits,
// next_token_logits, probs, multinomial's draws), int64 ones (input_ids
// and attention_mask grown a token a step, positions) and a decode
// forward's activations; memsh's phase holds the first two, byte for
// byte, beside the prompts' input_ids (made before generate, outside the
// oracle's count), and leaves the last two out: named here, with their
// bytes, so that they stay small.
func TestGRPOGenerateAsTransformers(t *testing.T) {
	for _, c := range []struct {
		prompt, completion, vocab int64
		cache, vocabBytes         int64  // the oracle's at its peak: torch.cat's 4-D caches, last dimension the vocabulary
		leftOut                   int64  // the oracle's int64 and other tensors there
		tokens                    int64  // next_tokens at memsh's peak: [8, 1] int64, 64 B, 512 in the allocator
		at                        string // memsh's op at the phase's peak (the oracle's: cat.default, _to_copy.default)
	}{
		// the last decode forward's last layer: four caches at 127 tokens
		// and the old values at 126; the last step's next_token_logits and probs
		{8, 120, 256, 4*65024 + 64512, 2 * 8192, 17024 + 5632, 0, "generate.cache_update"},
		// the sampler: the step's bf16 logits, the last step's next_token_logits
		// and probs and the step's next_token_logits; the caches at 15 tokens.
		// The same bytes are live again in torch.multinomial, whose q =
		// empty_like(probs).exponential_() takes the place of the last step's
		// probs (aten/src/ATen/native/Distributions.cpp multinomial_out, made
		// inside the op, so below the oracle's dispatch mode), beside its
		// result, resized before q: memsh's peak is there, by next_tokens'
		// 512 B
		{8, 8, 32000, 4 * 7680, 512000 + 3*1024000, 2752, 512, "generate.multinomial"},
	} {
		m := testmodels.Llama(64, 2, 4, 2, 128, c.vocab, "sdpa")
		p := testmodels.LlamaPlan(m, 8, c.prompt+c.completion, "bf16", "full", "H100-80GB")
		p.Preference = &core.Preference{Trainer: core.TrainerTRL, TRL: core.TRLFusedHead, Loss: core.LossGRPO, Reference: core.RefNone,
			GRPOConfig: core.GRPOConfig{Completion: c.completion}}
		r, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var before, peak int64
		at, began := "", false
		for _, pt := range r.Timeline {
			switch {
			case pt.Phase == replay.PhaseGeneration:
				began = true
				if pt.Allocated > peak {
					peak, at = pt.Allocated, pt.Op
				}
			case !began:
				before = pt.Allocated
			}
		}
		prompts := 8 * c.prompt * 8 // input_ids [8, prompt] int64: 512 B, a multiple of the allocator's 512
		if got, want := peak-before-prompts-c.tokens, c.cache+c.vocabBytes; got != want || at != c.at {
			t.Errorf("completion %d, vocabulary %d: memsh's generation peaks %d B above its prompts at %s, transformers' %d (caches %d, vocabulary-sized %d) at %s",
				c.completion, c.vocab, got, at, want, c.cache, c.vocabBytes, c.at)
		}
		if c.leftOut*10 > c.cache+c.vocabBytes {
			t.Errorf("completion %d: what memsh leaves out, %d B, is over a tenth of what it holds", c.completion, c.leftOut)
		}
	}
}
