package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// zeroTrace replays a small Llama (hidden 1,024, 4 layers) on 8 GPUs
// under ZeRO stage zero with the given sizes, bf16, with a trace.
func zeroTrace(t *testing.T, zero int, set func(p *core.Parallelism)) *replay.Report {
	t.Helper()
	m := testmodels.Llama(1024, 4, 16, 8, 4096, 32000, "sdpa")
	p := testmodels.LlamaPlan(m, 2, 512, "bf16", "none", "H100-80GB")
	p.Parallel = core.Parallelism{DP: 8, Zero: zero}
	set(&p.Parallel)
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestZeroReduceBucket: the reduce bucket DeepSpeed allocates (ZeRO-1/2 at
// each backward, ZeRO-3 at init) holds reduce_bucket_size elements of
// the 16-bit parameters: 5e8 by default (1,000,000,000 B), the Hugging
// Face Trainer's "auto" hidden_size² (1,024² x 2 B = 2,097,152 B), or
// what the config says.
func TestZeroReduceBucket(t *testing.T) {
	for _, zero := range []int{1, 2, 3} {
		for _, c := range []struct {
			name string
			size core.ZeroSize
			want int64
		}{
			{"default", core.ZeroSize{}, 1_000_000_000},
			{"auto", core.ZeroSize{Auto: true}, 1024 * 1024 * 2},
			{"1e7", core.ZeroSize{N: 10_000_000, Set: true}, 20_000_000},
		} {
			r := zeroTrace(t, zero, func(p *core.Parallelism) { p.ReduceBucketSize = c.size })
			var got int64
			for _, e := range r.Trace.Events {
				if e.Tensor == "ipg bucket" && e.Action == "alloc" {
					got = e.Size
					break
				}
			}
			if got != c.want {
				t.Errorf("zero=%d, reduce_bucket_size %s: ipg bucket %d B, want %d", zero, c.name, got, c.want)
			}
		}
	}
}

// TestZeroStage3Sizes: ZeRO-3's persistence threshold keeps a module
// gathered on every rank when it has fewer parameters (the RMSNorms'
// 1,024 < 1e5 by default: never gathered; threshold 0: each gathered in
// the forward and again in the backward, 9 norms x 2), and its prefetch
// bucket gathers the modules ahead (0: none, so never more than the
// module that runs and the persistent ones are gathered at once).
func TestZeroStage3Sizes(t *testing.T) {
	normGathers := func(r *replay.Report) (n int) {
		for _, e := range r.Trace.Events[r.Trace.Steady:] {
			if e.Action == "alloc" && strings.HasSuffix(e.Tensor, "norm gathered") {
				n++
			}
		}
		return n
	}
	mostGathered := func(r *replay.Report) (most int) {
		live := map[int64]bool{}
		for _, e := range r.Trace.Events[r.Trace.Steady:] {
			if !strings.HasSuffix(e.Tensor, " gathered") {
				continue
			}
			switch e.Action {
			case "alloc":
				live[e.Addr] = true
			case "free_requested", "free_completed":
				delete(live, e.Addr)
			}
			most = max(most, len(live))
		}
		return most
	}
	if n := normGathers(zeroTrace(t, 3, func(*core.Parallelism) {})); n != 0 {
		t.Errorf("default persistence threshold: %d norm gathers, want 0 (1,024 parameters < 1e5)", n)
	}
	if n := normGathers(zeroTrace(t, 3, func(p *core.Parallelism) { p.ParamPersistenceThreshold = core.ZeroSize{Set: true} })); n != 18 {
		t.Errorf("persistence threshold 0: %d norm gathers in the step, want 18 (9 norms, forward and backward)", n)
	}
	if most := mostGathered(zeroTrace(t, 3, func(*core.Parallelism) {})); most < 2 {
		t.Errorf("default prefetch bucket: at most %d modules gathered at once, want the prefetch's several", most)
	}
	if most := mostGathered(zeroTrace(t, 3, func(p *core.Parallelism) { p.PrefetchBucketSize = core.ZeroSize{Set: true} })); most != 1 {
		t.Errorf("prefetch bucket 0: at most %d modules gathered at once, want 1", most)
	}
}
