package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// BenchmarkEvaluateLlama70B evaluates one Llama-3-70B-sized plan (80 layers)
// on one GPU: lowering, replay and the allocator model.
func BenchmarkEvaluateLlama70B(b *testing.B) {
	m := testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash")
	plan := testmodels.LlamaPlan(m, 1, 8192, "bf16-mixed", "full", "H100-80GB")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The same step with expandable segments (alloc/allocator_expandable.go) and a
// validation pass before it (core/validation.go): the page-mapping allocator
// and a second, forward-only replay.
func BenchmarkEvaluateLlama70BExpandableValidation(b *testing.B) {
	m := testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash")
	plan := testmodels.LlamaPlan(m, 1, 8192, "bf16-mixed", "full", "H100-80GB")
	plan.ExpandableSegments, plan.Validation = true, true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluateBris3Sequential is SEEDS.md story 1's final attempt:
// Bris with 3 members one at a time, a validation pass first, expandable
// segments (graph_bris_test.go's plan).
func BenchmarkEvaluateBris3Sequential(b *testing.B) {
	plan := bris(b, 3, "sequential", 4, 32, "train")
	plan.Validation = true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
