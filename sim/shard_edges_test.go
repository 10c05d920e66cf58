package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestShardEdgesBytes counts by hand the collectives of FSDP's root unit
// and of DPO's reference copy that nothing overlaps (replay.ShardEdges) on
// dpoPlan's small Llama (38,308,352 parameters, bf16, 8 ranks): the root
// (embed_tokens and lm_head, 32,000 x 512 each, and the final norm, 512:
// 32,768,512 elements) gathered and reduce-scattered in bf16; with
// fsdp_units=["embed_tokens"] the root keeps lm_head and the norm
// (16,384,512); under LoRA it has no gradient to reduce; DPO's reference
// copy (FSDP2's unit of its own) gathered whole.
func TestShardEdgesBytes(t *testing.T) {
	const root, head = 2*32_000*512 + 512, 32_000*512 + 512
	const llama = 38_308_352
	for _, c := range []struct {
		name  string
		ref   string // DPO's reference, "" for none
		units []string
		want  replay.ShardEdges
	}{
		{"full fine-tune", "", nil, replay.ShardEdges{RootGather: 2 * root, RootScatter: 2 * root}},
		{"fsdp_units embed_tokens", "", []string{"embed_tokens"}, replay.ShardEdges{RootGather: 2 * head, RootScatter: 2 * head}},
		{"LoRA", core.RefAdapters, nil, replay.ShardEdges{RootGather: 2 * root}},
		{"DPO, reference copy", core.RefModel, nil, replay.ShardEdges{RootGather: 2 * root, RootScatter: 2 * root, RefGather: 2 * llama}},
	} {
		ref := c.ref
		if ref == "" {
			ref = core.RefModel
		}
		p := dpoPlan(ref, core.TRLLogits)
		if c.ref == "" || c.name == "LoRA" {
			p.Preference = nil
		}
		p.Parallel = core.Parallelism{DP: 8, FSDP: true, FSDPUnits: c.units}
		r, err := replay.Run(lower(t, p), p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Dist.ShardEdges(); got != c.want {
			t.Errorf("%s: %+v, hand count %+v", c.name, got, c.want)
		}
	}
}

// TestZeRO3EdgesBytes counts by hand ZeRO-3's gathers and reduce at a
// pass's edge (replay.ShardEdges) on dpoPlan's small Llama, 8 ranks,
// bf16: the embedding and the head (32,000 x 512 each, the forward's and
// the backward's first fetches; the final norm's 512 stay gathered, under
// stage3_param_persistence_threshold) and the reduce bucket the backward's
// epilogue flushes: reduce_bucket_size (500,000,000 elements) is more
// than the model's 38,308,352, so the whole gradient; with
// reduce_bucket_size=1,000,000, that.
func TestZeRO3EdgesBytes(t *testing.T) {
	const outside, llama = 2 * 32_000 * 512, 38_308_352
	for _, c := range []struct {
		bucket int64
		want   replay.ShardEdges
	}{
		{0, replay.ShardEdges{RootGather: 2 * outside, RootScatter: 2 * llama}},
		{1_000_000, replay.ShardEdges{RootGather: 2 * outside, RootScatter: 2 * 1_000_000}},
	} {
		p := dpoPlan(core.RefModel, core.TRLLogits)
		p.Preference = nil
		p.Parallel = core.Parallelism{DP: 8, Zero: 3}
		if c.bucket > 0 {
			p.Parallel.ReduceBucketSize = core.ZeroSize{Set: true, N: c.bucket}
		}
		r, err := replay.Run(lower(t, p), p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Dist.ShardEdges(); got != c.want {
			t.Errorf("reduce_bucket_size %d: %+v, hand count %+v", c.bucket, got, c.want)
		}
	}
}

// TestEvalGathersOnce: an evaluation step (phase="eval") runs the forward
// alone, so ZeRO-3 and FSDP gather each unit once and reduce nothing:
// dpoPlan's small Llama (38,308,352 parameters, bf16) all-gathers
// 76,616,704 B a step on 8 ranks (twice that was reported before December
// 2026, a forward and a backward).
func TestEvalGathersOnce(t *testing.T) {
	const llama = 38_308_352
	for _, par := range []core.Parallelism{{DP: 8, FSDP: true}, {DP: 8, FSDP: true, FSDPVersion: 1}, {DP: 8, Zero: 3}} {
		p := dpoPlan(core.RefModel, core.TRLLogits)
		p.Preference, p.Parallel, p.Phase = nil, par, core.Eval
		r := evalPlan(t, p)
		if got, rs := commBytes(r, "all_gather"), commBytes(r, "reduce_scatter"); got != 2*llama || rs != 0 {
			t.Errorf("%s, eval: all_gather %d B, reduce_scatter %d B; want %d and 0", par, got, rs, 2*llama)
		}
	}
}
