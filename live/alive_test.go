package live

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// llamaStep replays a small Llama step twice, for its timeline and its
// trace; with fsdp1, under FSDP1 on 8 GPUs, whose gradients the
// post-backward stream reads are freed in two steps (free_requested, then
// free_completed once that stream caught up).
func llamaStep(t *testing.T, fsdp1 bool) (timeline, traced *replay.Report) {
	t.Helper()
	m := testmodels.Llama(512, 2, 8, 4, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 256, "bf16-mixed", "none", "A100-80GB")
	if fsdp1 {
		p.Parallel = core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}
	}
	var err error
	if timeline, err = sim.Evaluate(p, core.Options{Timeline: true}); err != nil {
		t.Fatal(err)
	}
	if traced, err = sim.Evaluate(p, core.Options{Trace: true}); err != nil {
		t.Fatal(err)
	}
	return timeline, traced
}

// TestTimelineAt checks what is alive against the timeline at every
// event: the tensors' requested bytes add up to the allocated figure less
// the allocator's rounding (a block is its request rounded to 512 bytes,
// or a whole cached block when splitting it would leave under 1 MiB of a
// large one), and the peak event lists the tensors alive at the peak. A
// free that waits for another stream is one point, at its request.
func TestTimelineAt(t *testing.T) {
	for _, fsdp1 := range []bool{false, true} {
		tl, traced := llamaStep(t, fsdp1)
		checkTimeline(t, tl, traced)
	}
}

func checkTimeline(t *testing.T, tl, traced *replay.Report) {
	t.Helper()
	line, err := NewTimeline(tl, traced)
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	for i, p := range tl.Timeline {
		if p.Allocated > tl.Timeline[peak].Allocated {
			peak = i
		}
	}
	for _, i := range []int{0, len(tl.Timeline) / 3, peak, len(tl.Timeline) - 1} {
		m, err := line.At(i)
		if err != nil {
			t.Fatal(err)
		}
		sum := m.MoreBytes
		for _, x := range m.Tensors {
			sum += x.Bytes
		}
		n := int64(len(m.Tensors) + m.More)
		if sum > m.Allocated || sum < m.Allocated-(1<<20)*n {
			t.Errorf("event %d: the live tensors ask for %d bytes; the timeline allocates %d in %d blocks", i, sum, m.Allocated, n)
		}
		if m.Allocated != tl.Timeline[i].Allocated || m.Phase != tl.Timeline[i].Phase.String() {
			t.Errorf("event %d: moment %+v is not the timeline's point", i, m)
		}
		for k := 1; k < len(m.Tensors); k++ {
			if m.Tensors[k].Bytes > m.Tensors[k-1].Bytes {
				t.Errorf("event %d: tensors not largest first", i)
			}
		}
	}
	if m, _ := line.At(peak); m.Allocated != tl.PeakAllocated {
		t.Errorf("the peak event allocates %d, the report's peak is %d", m.Allocated, tl.PeakAllocated)
	}
	// Parameters set up in their module.
	m, _ := line.At(len(tl.Timeline) - 1)
	for _, x := range m.Tensors {
		if x.Name == "lm_head.weight" && x.Module != "lm_head" {
			t.Errorf("lm_head.weight is in module %q", x.Module)
		}
	}
	for _, bad := range []int{-1, len(tl.Timeline)} {
		if _, err := line.At(bad); err == nil {
			t.Errorf("At(%d) gave no error", bad)
		}
	}
}
