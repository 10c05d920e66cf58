package advise

import (
	"context"
	"errors"
	"sync"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// replayer replays candidates with sim.Evaluate on a few goroutines,
// counting the replays and reporting progress.
type replayer struct {
	ctx      context.Context
	workers  int
	progress func(done, total int)
	done     int // replays finished, for progress
	total    int // replays announced so far
	replays  int
}

// replayed is a candidate and its report.
type replayed struct {
	changes []Change
	plan    *core.Plan
	rep     *replay.Report
}

// eval replays one plan. A plan the engine rejects (a units.Error) is
// returned as such; ok is false only for that.
func (rs *replayer) eval(p *core.Plan) (*replay.Report, error) {
	if err := rs.ctx.Err(); err != nil {
		return nil, err
	}
	rs.replays++
	return sim.Evaluate(p, core.Options{})
}

// base replays the plan as given, announcing one replay.
func (rs *replayer) base(p *core.Plan) (*replay.Report, error) {
	rep, err := rs.eval(p)
	rs.step()
	return rep, err
}

// baseOrHostShort replays the plan as given. When it fails only
// train(host_memory=)'s check (the replay without the check needs more
// host memory per node than host_memory), it returns that replay and the
// check's message instead of the error, so that advice can look for the
// changes that pass it.
func (rs *replayer) baseOrHostShort(p *core.Plan) (*replay.Report, string, error) {
	rep, err := rs.base(p)
	if err == nil || p.HostMemory <= 0 {
		return rep, "", err
	}
	q := *p
	q.HostMemory = 0
	unchecked, uerr := rs.eval(&q)
	if uerr != nil {
		return nil, "", err
	}
	if need, _ := replay.HostNeed(p, unchecked.HostMemory); need <= p.HostMemory {
		return nil, "", err
	}
	msg := err.Error()
	var ue *units.Error
	if errors.As(err, &ue) {
		msg = ue.Msg
	}
	return unchecked, msg, nil
}

// step counts a finished replay for the progress callback.
func (rs *replayer) step() {
	rs.done++
	if rs.progress != nil {
		rs.progress(rs.done, rs.total)
	}
}

// run applies each list of changes to p and replays the results in
// parallel, in order; candidates the plan rejects are counted in
// st.Rejected and left out.
func (rs *replayer) run(p *core.Plan, cands [][]Change, st *Stats) ([]replayed, error) {
	plans := make([]*core.Plan, len(cands))
	for i, cs := range cands {
		q := p
		var err error
		for _, c := range cs {
			if q, err = c.Apply(q); err != nil {
				break
			}
		}
		if err != nil {
			if !rejected(err) {
				return nil, err
			}
			st.Rejected++
			continue
		}
		plans[i] = q
	}
	rs.total += len(plans)
	reps := make([]*replay.Report, len(plans))
	errs := make([]error, len(plans))
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(rs.workers, max(len(plans), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reps[i], errs[i] = sim.Evaluate(plans[i], core.Options{})
				mu.Lock()
				rs.replays++
				rs.step()
				mu.Unlock()
			}
		}()
	}
feed:
	for i, q := range plans {
		if q == nil {
			mu.Lock()
			rs.step()
			mu.Unlock()
			continue
		}
		select {
		case next <- i:
		case <-rs.ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := rs.ctx.Err(); err != nil {
		return nil, err
	}
	var out []replayed
	for i, q := range plans {
		switch {
		case q == nil:
		case errs[i] != nil && rejected(errs[i]):
			st.Rejected++
		case errs[i] != nil:
			return nil, errs[i]
		default:
			out = append(out, replayed{changes: cands[i], plan: q, rep: reps[i]})
		}
	}
	return out, nil
}

// rejected says whether err is the engine refusing a plan (a units.Error:
// a layout that does not divide, an unsupported combination), not a
// failure of the engine.
func rejected(err error) bool {
	var ue *units.Error
	return errors.As(err, &ue)
}
