package perfetto

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
)

// TestTraceSpansTheStep lays out steps of several layouts and checks the
// trace-event format (complete slices with a name, a category, a start and
// a duration on a named track, no two overlapping on a track) and that the
// slices sum to the report's step time.
func TestTraceSpansTheStep(t *testing.T) {
	m := testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash")
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		ckpt string
	}{
		{"one gpu", core.Parallelism{}, "none"},
		{"checkpointed fsdp", core.Parallelism{DP: 8, FSDP: true}, "full"},
		{"tp and pipeline", core.Parallelism{TP: 2, PP: 2, DP: 2, MicroBatches: 4}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testmodels.LlamaPlan(m, 1, 2048, "bf16-mixed", tc.ckpt, "H100-80GB")
			p.Parallel = tc.par
			rep, err := sim.Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := FromReport(rep, "llama")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tr.Span(), rep.Time.StepSeconds; math.Abs(got-want) > 1e-9*want {
				t.Errorf("trace spans %.9g s, the step is %.9g s", got, want)
			}
			var b bytes.Buffer
			if err := tr.Write(&b); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				TraceEvents []map[string]any `json:"traceEvents"`
			}
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			named := map[float64]bool{}
			end := map[float64]float64{}
			slices := 0
			for _, e := range doc.TraceEvents {
				switch e["ph"] {
				case "M":
					if e["name"] == "thread_name" {
						named[e["tid"].(float64)] = true
					}
				case "X":
					slices++
					for _, k := range []string{"name", "cat", "ts", "dur", "pid", "tid"} {
						if _, ok := e[k]; !ok {
							t.Fatalf("slice without %q: %v", k, e)
						}
					}
					tid, ts, dur := e["tid"].(float64), e["ts"].(float64), e["dur"].(float64)
					if !named[tid] || dur <= 0 || ts < end[tid] {
						t.Fatalf("slice on an unnamed track, empty, or overlapping the one before: %v", e)
					}
					end[tid] = ts + dur
				default:
					t.Fatalf("unexpected phase %v", e["ph"])
				}
			}
			if slices < len(rep.Time.Modules) {
				t.Errorf("%d slices for %d module rows", slices, len(rep.Time.Modules))
			}
		})
	}
}
