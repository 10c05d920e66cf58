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
	ctx context.Context
	// opts are the replays' options: lists a finished replay handed
	// back for the next to lower into, and one table of copied blocks'
	// names (reusing: the same reports, fewer bytes for the collector).
	opts     core.Options
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
	// host is the failure of train(host_memory=)'s check ("" when it
	// passes): rep is then the replay without the check.
	host string
}

// eval replays one plan. A plan the engine rejects (a units.Error) is
// returned as such; ok is false only for that.
func (rs *replayer) eval(p *core.Plan) (*replay.Report, error) {
	if err := rs.ctx.Err(); err != nil {
		return nil, err
	}
	rs.replays++
	return sim.Evaluate(p, rs.opts)
}

// base replays the plan as given, announcing one replay.
func (rs *replayer) base(p *core.Plan) (*replay.Report, error) {
	rep, err := rs.eval(p)
	rs.step()
	return rep, err
}

// baseOrHostShort replays the plan as given. When it fails only
// train(host_memory=)'s check, it returns the replay without the check
// and the check's message instead of the error (hostShort), so that
// advice can look for the changes that pass it.
func (rs *replayer) baseOrHostShort(p *core.Plan) (*replay.Report, string, error) {
	rep, err := rs.base(p)
	if err == nil {
		return rep, "", nil
	}
	unchecked, msg, n := hostShort(p, err, rs.opts)
	rs.replays += n
	if unchecked == nil {
		return nil, "", err
	}
	return unchecked, msg, nil
}

// hostShort says whether p, whose replay failed with err, fails only
// train(host_memory=)'s check: its replay without the check needs more
// host memory per node than host_memory (replay.HostNeed, the rule of
// the replay's own check and of the search's). It returns that replay
// and the check's message, or nil when err is something else; n counts
// the replays it made (with opts).
func hostShort(p *core.Plan, err error, opts core.Options) (unchecked *replay.Report, msg string, n int) {
	if p.HostMemory <= 0 || !rejected(err) {
		return nil, "", 0
	}
	q := *p
	q.HostMemory = 0
	rep, uerr := sim.Evaluate(&q, opts)
	if uerr != nil {
		return nil, "", 1
	}
	if need, _ := replay.HostNeed(p, rep.HostMemory); need <= p.HostMemory {
		return nil, "", 1
	}
	msg = err.Error()
	var ue *units.Error
	if errors.As(err, &ue) {
		msg = ue.Msg
	}
	return rep, msg, 1
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
// st.Rejected and left out. A candidate that fails train(host_memory=)'s
// check only is kept with its replay without the check (replayed.host)
// and counted in st.HostShort.
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
	hosts := make([]string, len(plans))
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(rs.workers, max(len(plans), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reps[i], errs[i] = sim.Evaluate(plans[i], rs.opts)
				n := 1
				if errs[i] != nil {
					unchecked, msg, extra := hostShort(plans[i], errs[i], rs.opts)
					if n += extra; unchecked != nil {
						reps[i], hosts[i], errs[i] = unchecked, msg, nil
					}
				}
				mu.Lock()
				rs.replays += n
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
			if hosts[i] != "" {
				st.HostShort++
			}
			out = append(out, replayed{changes: cands[i], plan: q, rep: reps[i], host: hosts[i]})
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
