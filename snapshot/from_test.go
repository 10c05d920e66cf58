package snapshot

import (
	"bytes"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
)

// TestFromReport checks a replayed step's snapshot against its report:
// the trace replays to the report's peaks allocated and reserved, and the
// final segments hold what the allocator holds.
func TestFromReport(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ckpt       string
		expandable bool
		batch      int64
	}{
		{"plain", "none", false, 1},
		{"checkpointed", "full", false, 2},
		{"expandable", "none", true, 1},
		{"oom", "none", false, 64}, // past the card: the trace goes on, as the replay does
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "flash")
			p := testmodels.LlamaPlan(m, tc.batch, 1024, "bf16-mixed", tc.ckpt, "RTX-3090")
			p.ExpandableSegments = tc.expandable
			rep, err := sim.Evaluate(p, core.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			s, err := FromReport(rep)
			if err != nil {
				t.Fatal(err)
			}
			a, r := s.Peaks()
			if a != rep.Trace.PeakRequested || r != rep.PeakReserved {
				t.Errorf("trace peaks %d allocated, %d reserved; report %d requested, %d reserved", a, r, rep.Trace.PeakRequested, rep.PeakReserved)
			}
			// Blocks round requests up by less than 512 B each, or keep a
			// remainder too small to split (under 512 B, or 1 MiB in the
			// large pool): the requested peak is at most the block peak.
			if a > rep.PeakAllocated || a < rep.PeakAllocated*9/10 {
				t.Errorf("requested peak %d against the block peak %d", a, rep.PeakAllocated)
			}
			if (rep.OOM != nil) != (tc.name == "oom") {
				t.Errorf("oom = %v", rep.OOM)
			}
			var b bytes.Buffer
			if err := s.Write(&b); err != nil {
				t.Fatal(err)
			}
			back, err := Read(b.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Trace) != len(s.Trace) || len(back.Segments) != len(s.Segments) {
				t.Errorf("read back %d events, %d segments; wrote %d, %d", len(back.Trace), len(back.Segments), len(s.Trace), len(s.Segments))
			}
		})
	}
}

// TestFromReportStreams: an FSDP1 step allocates on three streams; every
// segment and event carries its stream, the gradients the post-backward
// stream reads are freed in two steps (free_requested, then
// free_completed once that stream caught up), and the trace still replays
// to the replay's peak of requested bytes (a block stops counting as
// allocated at its request). The trace is the step from an empty allocator, so its
// reserved peak is at most the report's, which adds the side streams'
// segments cached from earlier steps.
func TestFromReportStreams(t *testing.T) {
	m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "full", "H100-80GB")
	p.Parallel = core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}
	rep, err := sim.Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	streams := map[int64]bool{}
	for _, g := range s.Segments {
		streams[g.Stream] = true
	}
	if !streams[0] || !streams[1] || !streams[2] {
		t.Errorf("segments on streams %v, want 0 (compute), 1 (unshard) and 2 (post-backward)", streams)
	}
	requested := map[int64]bool{}
	deferred := 0
	for i, e := range s.Trace {
		switch e.Action {
		case FreeRequested:
			requested[e.Addr] = true
			if i+1 < len(s.Trace) && s.Trace[i+1].Action == FreeCompleted && s.Trace[i+1].Addr == e.Addr {
				continue
			}
			deferred++
		case FreeCompleted:
			if !requested[e.Addr] {
				t.Fatalf("event %d: free_completed of %#x without its request", i, e.Addr)
			}
			delete(requested, e.Addr)
		}
	}
	if deferred == 0 {
		t.Errorf("no free waited for another stream")
	}
	a, r := s.Peaks()
	if a != rep.Trace.PeakRequested || r > rep.PeakReserved {
		t.Errorf("trace peaks %d allocated, %d reserved; report %d requested, %d reserved", a, r, rep.Trace.PeakRequested, rep.PeakReserved)
	}
}
