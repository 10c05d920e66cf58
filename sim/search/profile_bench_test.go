package search

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// BenchmarkSearchProfile prices one block profile (newProfile: the one-
// and two-block models and the three-stage pipelines of one and two
// blocks a stage, lowered and summed) of BenchmarkEvaluateLlama70B3D's
// layout; the 70B search makes 2,608 of them.
func BenchmarkSearchProfile(b *testing.B) {
	p := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p.GradAccum = 8
	p.Parallel = core.Parallelism{DP: 32, TP: 8, PP: 4, SequenceParallel: true, DistributedOptimizer: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := newProfile(p, flatUnits|stageUnits); err != nil {
			b.Fatal(err)
		}
	}
}
