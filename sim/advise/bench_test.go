package advise

import (
	"context"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// The speed record of the limits and of advice: replays per answer (under
// 50 for max_batch and max_seq) and time per answer, on Llama-2-7B on one
// A100-80GB (the quickstart).

func benchLimit(b *testing.B, find func(context.Context) (*Limit, error)) {
	var replays int
	for b.Loop() {
		lim, err := find(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		replays = lim.Replays
	}
	b.ReportMetric(float64(replays), "replays/answer")
}

func BenchmarkMaxBatch7B(b *testing.B) {
	p := testmodels.LlamaPlan(testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash"), 1, 2048, "bf16", "full", "A100-80GB")
	benchLimit(b, func(ctx context.Context) (*Limit, error) { return MaxBatch(ctx, p, 0) })
}

func BenchmarkMaxSeq7B(b *testing.B) {
	p := testmodels.LlamaPlan(testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash"), 1, 2048, "bf16", "full", "A100-80GB")
	benchLimit(b, func(ctx context.Context) (*Limit, error) { return MaxSeq(ctx, p, 0) })
}

func BenchmarkAdvise7B(b *testing.B) {
	p := testmodels.LlamaPlan(testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "A100-80GB")
	var replays int
	for b.Loop() {
		res, err := Run(context.Background(), p, Options{})
		if err != nil {
			b.Fatal(err)
		}
		replays = res.Stats.Replays
	}
	b.ReportMetric(float64(replays), "replays/answer")
}
