package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestPipelineUnevenStages: every stage's saved activations are its
// in-flight chunk forwards times the blocks of each chunk, counted by
// hand for gptStack's equal blocks.
//
//   - 1F1B, pp=4, 10 blocks, first_stage_layers=1, last_stage_layers=1:
//     the two middle stages hold (10-2)/2 = 4 each; stage s keeps
//     min(pp-s, m) = 4, 3, 2, 1 micro-batches: 4x1, 3x4, 2x4, 1x1 blocks.
//   - the same with Megatron's embedding and loss slots, pp=4, 10 blocks:
//     (10+2)/4 = 3 per stage, 2 on the first and on the last: 4x2, 3x3,
//     2x3, 1x2.
//   - interleaved, pp=2, v=2, m=4, stage_layers=[2, 3, 3, 2] (chunk g on
//     stage g mod 2): stage 0 runs 2 + 2 + 1 = 5 chunk forwards before
//     its first backward, chunks 0, 0, 2, 2, 0: 2+2+3+3+2 = 12 blocks;
//     stage 1 runs 0 + 2 + 1 = 3, chunks 1, 1, 3: 3+3+2 = 8.
//   - torchtitan's split of 10 blocks into 4 chunks (pp=4): 2, then 3 and
//     3 while the remainder of 2 lasts, and the last takes 2: 4x2, 3x3,
//     2x3, 1x2.
func TestPipelineUnevenStages(t *testing.T) {
	m := gptStack(10)
	one := evalPlan(t, distPlan(t, m, "bf16", core.Parallelism{}))
	perLayer := one.SavedActivations / 10
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		want []int64 // blocks of saved activations per stage
	}{
		{"first/last", core.Parallelism{PP: 4, MicroBatches: 8, FirstStageLayers: 1, LastStageLayers: 1}, []int64{4, 12, 8, 1}},
		{"embedding and loss slots", core.Parallelism{PP: 4, MicroBatches: 8, EmbeddingSlot: true, LossSlot: true}, []int64{8, 9, 6, 2}},
		{"interleaved list", core.Parallelism{PP: 2, VirtualStages: 2, MicroBatches: 4, StageLayers: []int64{2, 3, 3, 2}}, []int64{12, 8}},
		{"torchtitan", core.Parallelism{PP: 4, MicroBatches: 8, StageSplit: "torchtitan"}, []int64{8, 9, 6, 2}},
	} {
		rep := evalPlan(t, distPlan(t, m, "bf16", tc.par))
		if len(rep.Ranks) != len(tc.want) {
			t.Fatalf("%s: %d stage reports", tc.name, len(rep.Ranks))
		}
		for s, blocks := range tc.want {
			if got := rep.Ranks[s].SavedActivations; got != blocks*perLayer {
				t.Errorf("%s: stage %d saves %d bytes, want %d blocks x %d = %d", tc.name, s, got, blocks, perLayer, blocks*perLayer)
			}
		}
	}
}

// TestPipelineUnevenLayouts: the chunk counts of each split, and the
// layouts that cannot be built.
func TestPipelineUnevenLayouts(t *testing.T) {
	for _, tc := range []struct {
		par  core.Parallelism
		n    int64
		want string // the counts, or an error
	}{
		// Llama 3 405B (Dubey et al. 2024, section 3.3.2): 126 layers,
		// pp=16, one layer per chunk, the first chunk only the embedding.
		{core.Parallelism{PP: 16, VirtualStages: 8, EmbeddingSlot: true, LossSlot: true}, 126, "[0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 0]"},
		// Megatron first/last with interleaving: each stage's layers over its v chunks.
		{core.Parallelism{PP: 4, VirtualStages: 2, FirstStageLayers: 2, LastStageLayers: 4}, 18, "[1 3 3 2 1 3 3 2]"},
		// torchtitan on 126 layers, 8 stages x 2 (its Interleaved1F1B default).
		{core.Parallelism{PP: 8, VirtualStages: 2, StageSplit: "torchtitan"}, 126, "[7 8 8 8 8 8 8 8 8 8 8 8 8 8 8 7]"},
		{core.Parallelism{PP: 16, VirtualStages: 2}, 126, "pp*virtual_stages = 32 does not divide 126 layers"},
		{core.Parallelism{PP: 4, FirstStageLayers: 3}, 10, "the 7 layers left for the 3 middle stages do not divide evenly"},
		{core.Parallelism{PP: 4, StageLayers: []int64{4, 0, 3, 3}}, 10, "pipeline stage 1 (chunk 0 of 1) has no layer"},
		{core.Parallelism{PP: 4, StageLayers: []int64{4, 3, 3}}, 10, "stage_layers has 3 counts for 4 model chunks"},
		{core.Parallelism{PP: 4, StageLayers: []int64{4, 3, 3, 3}}, 10, "the stages hold 13 layers but the model has 10"},
		{core.Parallelism{PP: 4, VirtualStages: 2, FirstStageLayers: 3}, 15, "stage 0's 3 layers do not divide over virtual_stages=2"},
		{core.Parallelism{PP: 4, FirstStageLayers: 1, EmbeddingSlot: true}, 10, "cannot be combined with account_for_embedding"},
	} {
		got, err := tc.par.ChunkLayers(tc.n, "m")
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if !strings.Contains(s, tc.want) {
			t.Errorf("%s over %d layers: %s, want %s", tc.par, tc.n, s, tc.want)
		}
	}
	for _, tc := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{FirstStageLayers: 2}, "they need pp >= 2"},
		{core.Parallelism{PP: 2, StageSplit: "balanced"}, `unknown stage_layers "balanced"`},
		{core.Parallelism{PP: 2, StageSplit: "torchtitan", LastStageLayers: 1}, "are alternatives"},
	} {
		if err := tc.par.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
}
