package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// streamPeak is the most stream name reserved at once in rep (0 if unused).
func streamPeak(rep *replay.Report, name string) int64 {
	for _, s := range rep.Streams {
		if s.Name == name {
			return s.Bytes
		}
	}
	return 0
}

// TestFSDPStreams counts the side streams' pools by hand on linearStack(8,
// 1024, 4096) (eight units of two 1024 x 4096 weights) over 8 ranks with
// bf16-mixed: each unit gathers 8 Mi bf16 elements, 16 MiB, a segment of
// its own (>= 10 MiB requests get one rounded to 2 MiB); its sharded fp32
// gradient is 2 x 512 x 1024 x 4 B = 4 MiB, carved from 20 MiB segments.
//
//   - FSDP2 allocates each all-gather output on the copy-in stream and, in
//     the forward, keeps it until the next unit's copy-out; with the next
//     unit prefetched two are live: 2 x 16 MiB. Its reduce-scatter output,
//     the sharded gradient, is allocated on the reduce-scatter stream:
//     8 x 4 MiB in two 20 MiB segments (five fit in one).
//   - FSDP1 allocates the unsharded FlatParameter on the unshard stream and
//     records it on the compute stream at reshard: it is reused only after
//     the rate limiter waited for its free event, two reshards later, so
//     the unshard stream holds three: 3 x 16 MiB. Its post-backward stream
//     holds the sharded gradients of the FlatParameters: each unit's
//     reduce-scatter writes 1 Mi x 2 B in the gather dtype, cast to the
//     fp32 parameters' dtype there and freed (fsdp1.go
//     castGradToParamDType), so 8 x 4 MiB of fp32 shards stay, in two
//     20 MiB segments as FSDP2's. Under mixed
//     precision each unit's pre_unshard allocates its bf16 _mp_shard,
//     1 Mi x 2 B, on the pre-unshard stream (replay/fsdp1_offload.go),
//     freed after its all-gather: one 20 MiB segment.
//
// The steady state reserves the side streams' segments beside the compute
// stream's peak.
func TestFSDPStreams(t *testing.T) {
	const mib = 1 << 20
	m := linearStack(8, 1024, 4096)
	for _, tc := range []struct {
		name                  string
		par                   core.Parallelism
		allGather, red, preUn int64
	}{
		{"FSDP2", core.Parallelism{DP: 8, FSDP: true}, 32 * mib, 40 * mib, 0},
		{"FSDP1", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, 48 * mib, 40 * mib, 20 * mib},
	} {
		rep := evalPlan(t, distPlan(t, m, "bf16-mixed", tc.par))
		ag, rs := streamPeak(rep, "all_gather"), streamPeak(rep, "reduce_scatter")
		if ag != tc.allGather || rs != tc.red {
			t.Errorf("%s: all-gather stream %d MiB, reduce-scatter stream %d MiB; want %d and %d", tc.name, ag/mib, rs/mib, tc.allGather/mib, tc.red/mib)
		}
		pu := streamPeak(rep, "pre_unshard")
		if pu != tc.preUn {
			t.Errorf("%s: pre-unshard stream %d MiB, want %d", tc.name, pu/mib, tc.preUn/mib)
		}
		if want := streamPeak(rep, "compute") + ag + rs + pu; rep.PeakReserved != want {
			t.Errorf("%s: peak reserved %d, want the compute stream's peak plus the side streams' (%d)", tc.name, rep.PeakReserved, want)
		}
		if got := rep.Category("all_gather_stream") + rep.Category("reduce_scatter_stream"); got <= 0 || got > ag+rs {
			t.Errorf("%s: the side streams' breakdown rows hold %d, want (0, %d]", tc.name, got, ag+rs)
		}
	}
}

// TestOffloadStream: torchtune's activation offload brings each activation
// back on its own stream, so those copies never reuse the compute
// stream's blocks; one GPU without offload allocates on the compute
// stream alone.
func TestOffloadStream(t *testing.T) {
	m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "RTX-3090")
	plain := evalPlan(t, p)
	if len(plain.Streams) != 1 || plain.Streams[0].Name != "compute" || plain.Streams[0].Bytes != plain.PeakReserved {
		t.Errorf("one GPU: streams %v, want the compute stream alone with the peak reserved %d", plain.Streams, plain.PeakReserved)
	}
	p.Offload = &core.Offload{Activations: "cpu"}
	off := evalPlan(t, p)
	if streamPeak(off, "offload") == 0 || off.Category("offload_stream") == 0 {
		t.Errorf("activation offload: streams %v, breakdown %v; want an offload stream", off.Streams, off.Breakdown)
	}
}

// TestOOMAgreesWithBreakdown: the OOM message's "this process has X
// memory in use" is the reserved memory when the request failed plus every
// row outside the allocator (r.overheads, the breakdown's cuda_context and
// nccl_* rows), and its "reserved but unallocated" is reserved less
// allocated then.
func TestOOMAgreesWithBreakdown(t *testing.T) {
	m := testmodels.Llama(4096, 8, 32, 8, 14336, 128256, "flash")
	p := testmodels.LlamaPlan(m, 16, 4096, "bf16-mixed", "none", "A100-40GB")
	p.Parallel = core.Parallelism{DP: 8, FSDP: true}
	r := evalPlan(t, p)
	if r.OOM == nil {
		t.Fatal("the plan fits; the test needs an OOM")
	}
	var outside int64
	for _, o := range r.Overheads {
		outside += o.Bytes
		if r.Category(o.Name) != o.Bytes {
			t.Errorf("breakdown row %s = %d, overhead %d", o.Name, r.Category(o.Name), o.Bytes)
		}
	}
	o := r.OOM
	if o.InUse != o.Reserved+outside {
		t.Errorf("in use %d, want reserved %d + outside the allocator %d", o.InUse, o.Reserved, outside)
	}
	for _, want := range []string{"this process has " + gibString(o.InUse) + " memory in use",
		gibString(o.Allocated) + " is allocated by PyTorch", gibString(o.Reserved-o.Allocated) + " is reserved by PyTorch but unallocated"} {
		if !strings.Contains(o.Message, want) {
			t.Errorf("message %q lacks %q", o.Message, want)
		}
	}
}

// gibString is PyTorch's format_size for sizes past 1 GiB and of MiB.
func gibString(n int64) string {
	if n > 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}
