package live

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/replay"
)

// Timeline answers what is alive after each event of a replayed step: the
// timeline's points (what the chart draws) and the device trace of the
// same replay (which tensor each event allocates or frees: one alloc or
// free per point, in order). A step replayed after its first step
// (sim/replay/lazy_states.go) has the first step's setup, a point where
// the first step ends, and the steady step as its timeline, and both
// steps in its trace (replay.Trace.Steady).
type Timeline struct {
	points []replay.Point
	events []replay.TraceEvent // the trace's alloc and free events
	// Point i has seen i+1 of events (one per point) before point
	// setup, the first step's end, and i+1+skip from there (the first
	// step's events after its setup fold into its end); without a first
	// step setup is past the last point.
	setup, skip int
}

// NewTimeline pairs a report's timeline with the trace of the same step
// (the report replayed with core.Options.Trace).
func NewTimeline(timeline, traced *replay.Report) (*Timeline, error) {
	if traced.Trace == nil {
		return nil, fmt.Errorf("the report has no device trace")
	}
	t := &Timeline{points: timeline.Timeline, setup: len(timeline.Timeline)}
	requested := map[int64]bool{} // freed while other streams used them: completed later, not a point of their own
	firstEvents := 0              // of the first step's, before the steady step's
	for i, e := range traced.Trace.Events {
		if i == traced.Trace.Steady {
			firstEvents = len(t.events)
		}
		switch e.Action {
		case "alloc":
			t.events = append(t.events, e)
		case "free_requested":
			requested[e.Addr] = true
			t.events = append(t.events, e)
		case "free_completed":
			if requested[e.Addr] {
				delete(requested, e.Addr)
				continue
			}
			t.events = append(t.events, e)
		}
	}
	if traced.Trace.Steady > 0 {
		steady := len(t.events) - firstEvents
		setup := len(t.points) - 1 - steady // the first step's setup points
		if setup < 0 || setup > firstEvents {
			return nil, fmt.Errorf("the trace has %d allocation events of the first step and %d of the steady one, the timeline %d points", firstEvents, steady, len(t.points))
		}
		t.setup, t.skip = setup, firstEvents-setup-1 // the first step's end sees all its events
		return t, nil
	}
	if len(t.events) != len(t.points) {
		return nil, fmt.Errorf("the trace has %d allocation events, the timeline %d points", len(t.events), len(t.points))
	}
	return t, nil
}

// At is what is alive after event i.
func (t *Timeline) At(i int) (Moment, error) {
	if i < 0 || i >= len(t.points) {
		return Moment{}, fmt.Errorf("event %d is outside the timeline (0 to %d)", i, len(t.points)-1)
	}
	live := map[int64]replay.TraceEvent{}
	seen := i + 1
	if i >= t.setup {
		seen += t.skip
	}
	for _, e := range t.events[:seen] {
		if e.Action == "alloc" {
			live[e.Addr] = e
		} else {
			delete(live, e.Addr)
		}
	}
	ts := make([]Tensor, 0, len(live))
	for _, e := range live {
		ts = append(ts, Tensor{Name: e.Tensor, Op: e.Op, Module: e.Module, Phase: e.Phase.String(), Bytes: e.Size})
	}
	sort.Slice(ts, func(a, b int) bool {
		return ts[a].Bytes > ts[b].Bytes || ts[a].Bytes == ts[b].Bytes && ts[a].Name < ts[b].Name
	})
	p := t.points[i]
	m := Moment{Event: i, Phase: p.Phase.String(), Op: p.Op, Allocated: p.Allocated}
	if len(ts) > MaxTensors {
		for _, x := range ts[MaxTensors:] {
			m.MoreBytes += x.Bytes
		}
		m.More = len(ts) - MaxTensors
		ts = ts[:MaxTensors]
	}
	m.Tensors = ts
	return m, nil
}
