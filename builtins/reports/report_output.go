package reports

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/plot"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// Plan is the plan the report simulated.
func (x *Report) Plan() *plans.Plan { return x.plan }

// Title is the report's first line: "llama-7b on H100-80GB: batch 8 x seq
// 2048, bf16-mixed, adamw(), no checkpointing".
func (x *Report) Title() string {
	return fmt.Sprintf("%s on %s: %s", x.plan.P.Model.Name, x.plan.P.Device.Name, x.plan.Summary())
}

// WithTimeline returns the simulated report with its timeline: the report
// itself when simulate() recorded one, else a replay of its plan with the
// timeline on (replayedWith).
func (x *Report) WithTimeline() (*replay.Report, error) {
	if x.r.Timeline != nil {
		return x.r, nil
	}
	return x.replayedWith(core.Options{Timeline: true}, "timeline", "simulate(plan, timeline=True)")
}

// WithTrace returns the simulated report replayed with its device trace
// (every allocator event with its address, and the final segments): what
// a memory snapshot holds.
func (x *Report) WithTrace() (*replay.Report, error) {
	if x.r.Trace != nil {
		return x.r, nil
	}
	return x.replayedWith(core.Options{Trace: true}, "device trace", "")
}

// replayedWith replays the report's plan with opts. The engine is
// deterministic, so the replay gives the same figures; they are checked,
// and a pipeline rank's report is found among the replay's ranks.
func (x *Report) replayedWith(opts core.Options, what, instead string) (*replay.Report, error) {
	again, err := sim.Evaluate(x.plan.P, opts)
	if err != nil {
		return nil, host.WithOrigin(err, x.plan.Decl())
	}
	for _, r := range append([]*replay.Report{again}, again.Ranks...) {
		if r.PeakAllocated == x.r.PeakAllocated && r.PeakReserved == x.r.PeakReserved && r.DeviceUsed == x.r.DeviceUsed {
			return r, nil
		}
	}
	err = fmt.Errorf("cannot rebuild the %s of this report (replaying its plan gave other figures)", what)
	if instead != "" {
		err = fmt.Errorf("%v: use %s", err, instead)
	}
	return nil, err
}

// sparkWidth is the width of the sparkline in print(r) on a terminal.
const SparkWidth = 60

// addSparkline adds the timeline of allocated memory as a sparkline (and
// the phases under it) to the rows of a rendered report, on a terminal
// only (color): goldens and pipes stay as they are.
func (x *Report) addSparkline(d *host.TextGrid, color bool) {
	if !color {
		return
	}
	r, err := x.WithTimeline()
	if err != nil {
		return
	}
	spark, phases := plot.Sparkline(r.Timeline, SparkWidth)
	if spark == "" {
		return
	}
	d.Add("timeline", spark)
	d.Add("", phases)
}
