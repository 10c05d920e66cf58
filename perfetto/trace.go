package perfetto

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/memsh/memsh/sim/replay"
)

// Event is one entry of the trace-event format (the "JSON Object Format"
// of the Trace Event Format document): complete slices (ph "X") and
// metadata naming the process and its tracks (ph "M").
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`            // microseconds
	Dur  float64        `json:"dur,omitempty"` // microseconds, complete events
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// Trace is the document.
type Trace struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit"`
}

// The tracks, in the order Perfetto shows them.
var tracks = []struct {
	tid  int
	name string
}{{1, "compute"}, {2, "communication"}, {3, "pipeline"}, {4, "host"}, {5, "step"}}

// trackOf is the track of a step term by its kind (ModuleTime.Bound).
func trackOf(kind string) int {
	switch kind {
	case "comm":
		return 2
	case "bubble":
		return 3
	case "host":
		return 4
	case "optimizer":
		return 1
	}
	return 5
}

// FromReport lays the report's step by module out as a trace titled
// title. It fails when the report has no step time.
func FromReport(r *replay.Report, title string) (*Trace, error) {
	rows := r.Time.Modules
	if len(rows) == 0 || !(r.Time.StepSeconds > 0) {
		return nil, fmt.Errorf("the report has no step time to trace (the time model did not run: %v)", r.Time.Notes)
	}
	t := &Trace{DisplayTimeUnit: "ms"}
	t.TraceEvents = append(t.TraceEvents, Event{Name: "process_name", Ph: "M", PID: 1, Args: map[string]any{"name": title}})
	for _, tr := range tracks {
		t.TraceEvents = append(t.TraceEvents,
			Event{Name: "thread_name", Ph: "M", PID: 1, TID: tr.tid, Args: map[string]any{"name": tr.name}},
			Event{Name: "thread_sort_index", Ph: "M", PID: 1, TID: tr.tid, Args: map[string]any{"sort_index": tr.tid}})
	}
	now := 0.0 // microseconds
	slice := func(name, cat string, tid int, seconds float64, args map[string]any) {
		if seconds <= 0 {
			return
		}
		d := seconds * 1e6
		t.TraceEvents = append(t.TraceEvents, Event{Name: name, Cat: cat, Ph: "X", TS: now, Dur: d, PID: 1, TID: tid, Args: args})
		now += d
	}
	var modules, terms []replay.ModuleTime
	for _, m := range rows {
		if m.Count > 0 {
			modules = append(modules, m)
		} else {
			terms = append(terms, m)
		}
	}
	args := func(m replay.ModuleTime) map[string]any {
		return map[string]any{"module": m.Name, "instances": m.Count, "bound": m.Bound, "flops": m.FLOPs, "bytes": m.Bytes}
	}
	for _, m := range modules {
		slice(m.Name, "forward", 1, m.Forward, args(m))
	}
	for i := len(modules) - 1; i >= 0; i-- {
		m := modules[i]
		slice(m.Name, "recompute", 1, m.Recompute, args(m))
		slice(m.Name, "backward", 1, m.Backward, args(m))
	}
	for _, m := range modules {
		slice(m.Name, "launch", 5, m.Launch, args(m))
	}
	for _, m := range terms {
		slice(m.Name, m.Bound, trackOf(m.Bound), m.Seconds, map[string]any{"term": m.Name})
	}
	return t, nil
}

// Span is the trace's length in seconds: the end of its last slice.
func (t *Trace) Span() float64 {
	end := 0.0
	for _, e := range t.TraceEvents {
		end = max(end, e.TS+e.Dur)
	}
	return end / 1e6
}

// Write writes the trace as JSON.
func (t *Trace) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(t)
}
