package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/timing"
)

// TestSustainIsFitted checks that each generation's fitted Sustain
// (hw.KernelRates.Sustain, the time model's one constant fitted to
// training runs) is the median over that generation's calibration rows
// (counted, not held out) of the value that makes the row's step time
// match the published one. A row's step time is t(s) = a + b/s in s (the
// GEMM and attention time scales as 1/s): two evaluations fix a and b,
// and the row's own s is b / (measured - a).
//
// With -v it prints each row's own value beside what could separate the
// rows (sustainTraits): the GPU and its HBM bandwidth, the precision, the
// sequence, the parallelism, the recompute, the share of the row's op
// time in flash-attention kernels, the share of its step that does not
// scale with Sustain (a / t) and the step's breakdown. docs/time.md
// ("Why the Ampere rows split") reads this table.
func TestSustainIsFitted(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every calibration row twice")
	}
	fits := map[float64][]float64{} // catalog Sustain -> the rows' own values
	for _, row := range stepRows() {
		if row.heldOut || row.excluded != "" || row.miss != "" {
			continue
		}
		p := row.plan()
		s0 := p.Device.Rates().Sustain
		var bd []string
		step := func(s float64) (float64, float64) {
			q := row.plan()
			q.Device.Kernels.Sustain = s
			r, err := Evaluate(q, core.Options{})
			if err != nil {
				t.Fatalf("%s: %v", row.name, err)
			}
			m := row.measured
			if m < 0 {
				m = r.Time.StepSeconds * r.Time.MFU / -row.measured
			}
			if bd == nil {
				for _, sh := range r.Time.Breakdown {
					if sh.Seconds > 0 {
						bd = append(bd, fmt.Sprintf("%s %.1f%%", sh.Name, 100*sh.Seconds/r.Time.StepSeconds))
					}
				}
			}
			return r.Time.StepSeconds, m
		}
		t1, m := step(s0)
		t2, _ := step(0.9 * s0)
		b := (t1 - t2) / (1/s0 - 1/(0.9*s0))
		a := t1 - b/s0
		own := b / (m - a)
		fits[s0] = append(fits[s0], own)
		t.Logf("%-52s own %.3f  %s  fixed %4.1f %%  [%s]", row.name, own, sustainTraits(t, p), 100*a/t1, strings.Join(bd, ", "))
	}
	for s0, xs := range fits {
		got := median(xs)
		t.Logf("Sustain %.2f: the %d calibration rows' own values have median %.3f", s0, len(xs), got)
		if math.Abs(got-s0) > 0.01 {
			t.Errorf("Sustain %.2f in the catalog, but its calibration rows fit %.3f: refit it", s0, got)
		}
	}
}

// sustainTraits is what a calibration row's plan says of the traits that
// could separate the rows' own Sustain values: the GPU with its HBM
// bandwidth, the precision, the sequence, the parallelism, the
// recompute, and the share of the op time (forward and backward) spent
// in flash-attention kernels (eager attention's matmuls are not counted
// there).
func sustainTraits(t *testing.T, p *core.Plan) string {
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var attn, all float64
	for _, c := range timing.PriceOps(prog, p) {
		all += c.Fwd + c.Bwd
		if c.Attention {
			attn += c.Fwd + c.Bwd
		}
	}
	par := p.Parallel
	return fmt.Sprintf("%s %4.0f GB/s  %-10s seq %5d  dp %3d tp %d pp %d  ckpt %-4s  flash %4.1f %%",
		p.Device.Name, p.Device.HBMGBps, p.Precision.Name, p.Seq, max(par.DP, 1), max(par.TP, 1), max(par.PP, 1),
		p.Checkpoint.Mode, 100*attn/max(all, 1e-30))
}
