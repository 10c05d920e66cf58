package live

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/replay"
)

// Timeline answers what is alive after each event of a replayed step: the
// timeline's points (what the chart draws) and the device trace of the
// same replay (which tensor each event allocates or frees: one alloc or
// free per point, in order).
type Timeline struct {
	points []replay.Point
	events []replay.TraceEvent // the trace's alloc and free events, one per point
}

// NewTimeline pairs a report's timeline with the trace of the same step
// (the report replayed with core.Options.Trace).
func NewTimeline(timeline, traced *replay.Report) (*Timeline, error) {
	if traced.Trace == nil {
		return nil, fmt.Errorf("the report has no device trace")
	}
	t := &Timeline{points: timeline.Timeline}
	requested := map[int64]bool{} // freed while other streams used them: completed later, not a point of their own
	for _, e := range traced.Trace.Events {
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
	for _, e := range t.events[:i+1] {
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
