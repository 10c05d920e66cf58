package sim

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

func TestZZPeak(t *testing.T) {
	for _, c := range readFSDPLive(t) {
		if c.Name != os.Getenv("CASE") {
			continue
		}
		r, _ := Evaluate(fsdpLivePlan(t, &c), core.Options{Trace: true})
		tr := r.Trace
		live := map[int64]replay.TraceEvent{}
		var now, peak int64
		var at []replay.TraceEvent
		var pe replay.TraceEvent
		for i, e := range tr.Events {
			switch e.Action {
			case "alloc":
				live[e.Addr] = e
				now += e.Size
			case "free_requested", "free_completed":
				if l, ok := live[e.Addr]; ok {
					delete(live, e.Addr)
					now -= l.Size
				}
			default:
				continue
			}
			if i >= tr.Steady && now > peak {
				peak, pe = now, e
				at = at[:0]
				for _, l := range live {
					at = append(at, l)
				}
			}
		}
		sort.Slice(at, func(i, j int) bool { return at[i].Tensor < at[j].Tensor })
		fmt.Println("peak", peak, "at", pe.Phase, pe.Op, pe.Tensor)
		for _, l := range at {
			if l.Phase != replay.PhaseSetup && l.Phase != replay.PhaseOptimizer {
				fmt.Printf("%9d %-9s %s\n", l.Size, l.Phase, l.Tensor)
			}
		}
	}
}
