package search

import (
	"sync"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// hostChecks applies train(host_memory=)'s check to each layout as its
// replay does (replay's checkHost), and remembers which replays failed
// it: a layout whose host-held states or buffers need more host memory
// per node than host_memory does not fit, as one over the GPU's memory
// does not, and the search goes on to the next (an offload=["params",
// "nvme"] search finds the ZeRO-Infinity layouts when the host cannot
// hold the optimizer state).
type hostChecks struct {
	short sync.Map // *replay.Report -> struct{}: the replays that failed the check
}

// evaluate is eval(p) (sim.Evaluate or sim.EvaluateBelow), or, when that
// fails and p fails train(host_memory=)'s check (its replay without the
// check needs more than host_memory per node: replay.HostNeed, the rule
// checkHost and advise share), that replay marked not fitting. Any other
// failure is eval's error.
func (h *hostChecks) evaluate(p *core.Plan, opts core.Options, eval func(*core.Plan) (*replay.Report, error)) (*replay.Report, error) {
	r, err := eval(p)
	if err == nil || p.HostMemory <= 0 {
		return r, err
	}
	q := *p
	q.HostMemory = 0
	unchecked, uerr := sim.Evaluate(&q, opts)
	if uerr != nil {
		return nil, err
	}
	if need, _ := replay.HostNeed(p, unchecked.HostMemory); need <= p.HostMemory {
		return nil, err
	}
	unchecked.Fits = false
	h.short.Store(unchecked, struct{}{})
	return unchecked, nil
}

// failed says whether report r is a replay that failed the host check.
func (h *hostChecks) failed(r *replay.Report) bool {
	_, ok := h.short.Load(r)
	return ok
}
