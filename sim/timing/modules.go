package timing

import (
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// The step by module (r.modules): every op's forward, backward and
// recompute time summed by the module it runs in, with the layer indices
// of the path folded ("layers.*.mlp.down_proj"), the CPU dispatch beyond
// the GPU's work charged to the modules that cause it, then the step's
// terms outside the modules (exposed communication, bubble, optimizer,
// host transfers, step overhead). The rows sum to the step time.
//
// A module is compute-, memory- or launch-bound by what most of its time
// is: its ops' GPU time by their own bound, or the launch time charged to
// it.

// foldPath folds the indices of a module path: numeric segments and
// numbered chunks (chunk4) become *, and the copies the lowering adds in
// front of a path (pipeline stage2, micro-batch mb0, ensemble member3,
// rollout1) are dropped, so a row reads like the model's module tree.
func foldPath(p string) string { return string(appendFoldPath(nil, p)) }

// appendFoldPath appends foldPath(p) to dst in one pass over the
// segments: moduleRows folds into one buffer and makes a string only for a
// row it has not seen (a pipeline stage's step folds thousands of paths
// into a few dozen rows).
func appendFoldPath(dst []byte, p string) []byte {
	rest := p
	for rest != "" { // the copies' segments in front
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			if copyPrefix(rest) {
				rest = ""
			}
			break
		}
		if !copyPrefix(rest[:i]) {
			break
		}
		rest = rest[i+1:]
	}
	if rest == "" || rest[0] == '.' {
		return append(dst, "(model)"...)
	}
	for { // a segment at a time, found by IndexByte rather than a byte at a time
		seg := rest
		i := strings.IndexByte(rest, '.')
		if i >= 0 {
			seg = rest[:i]
		}
		j := len(seg)
		for j > 0 && seg[j-1]-'0' <= 9 { // (a byte below '0' wraps past 9)
			j--
		}
		if j < len(seg) && (j == 0 || seg[:j] == "chunk") {
			dst = append(append(dst, seg[:j]...), '*')
		} else {
			dst = append(dst, seg...)
		}
		if i < 0 {
			return dst
		}
		dst = append(dst, '.')
		rest = rest[i+1:]
	}
}

// copyPrefix reports whether a path segment names a copy the lowering
// adds: stage<k>, mb<k>, member<k>, rollout<k>.
func copyPrefix(s string) bool {
	var k string // the digits after the prefix (no prefix is another's)
	switch {
	case strings.HasPrefix(s, "stage"):
		k = s[len("stage"):]
	case strings.HasPrefix(s, "mb"):
		k = s[len("mb"):]
	case strings.HasPrefix(s, "member"):
		k = s[len("member"):]
	case strings.HasPrefix(s, "rollout"):
		k = s[len("rollout"):]
	}
	for i := range len(k) {
		if k[i] < '0' || k[i] > '9' {
			return false
		}
	}
	return k != ""
}

// moduleAgg accumulates one row.
type moduleAgg struct {
	row        replay.ModuleTime
	byBound    [4]float64 // GPU seconds by Bound
	cpuExcessF float64    // forward CPU beyond GPU, per micro-batch
	cpuExcessB float64    // backward and recompute CPU beyond GPU
}

// moduleScratch is moduleRows' lists and maps, kept for the next call
// on the same goroutine (timingScratch): a
// search times hundreds of stages, and the maps of module paths made
// afresh for each were a twentieth of BenchmarkSearchLlama70B1024's
// bytes.
type moduleScratch struct {
	aggs     []moduleAgg      // the rows, in the order first seen
	byName   map[string]int32 // each row's index by its folded path
	folded   map[string]int32 // the row of each module path seen (its foldPath's)
	inRegion []bool
	buf      []byte // a folded path
}

// timingScratch is the time model's lists that a ProgramBuffers keeps
// (core.ProgramBuffers.Timing) for the next stage timed on the same
// goroutine: the ops' prices (computeTime) and moduleRows'.
type timingScratch struct {
	prices  Prices
	modules moduleScratch
}

// scratchOf is the timingScratch bufs keeps (a new one for nil bufs).
func scratchOf(bufs *core.ProgramBuffers) *timingScratch {
	if bufs == nil {
		return &timingScratch{}
	}
	s, ok := bufs.Timing.(*timingScratch)
	if !ok {
		s = &timingScratch{}
		bufs.Timing = s
	}
	return s
}

// moduleRows builds r.modules for one GPU doing w with times gt: the
// per-micro-batch parts paid m times, the tail once.
func moduleRows(w *GpuWork, gt gpuTime, m float64) []replay.ModuleTime {
	rows, ok := microBatchRows(w, gt.PerMB, m)
	if !ok {
		return nil
	}
	return appendTail(rows, gt.Tail)
}

// microBatchRows is moduleRows without the tail's terms: the modules'
// rows and the per-micro-batch terms of perMB, paid m times; ok is
// false where w keeps no ops to read (moduleRows has no rows then, not
// even the terms).
func microBatchRows(w *GpuWork, perMB []replay.TimeShare, m float64) (rows []replay.ModuleTime, ok bool) {
	if w.prog == nil || len(w.costs) != len(w.prog.Ops) {
		return nil, false
	}
	prog := w.prog
	var s *moduleScratch
	if w.scratch != nil {
		s = &w.scratch.modules
	} else {
		s = &moduleScratch{}
	}
	s.inRegion = resize(s.inRegion, len(prog.Ops))
	inRegion := s.inRegion
	clear(inRegion)
	for id, done := range w.redone {
		if done && !w.Eval {
			reg := prog.Regions[id]
			for j, end := reg.First, prog.RecomputeEnd(int32(id+1)); j < end; j++ { // its early stop
				inRegion[j] = true
			}
		}
	}
	if s.byName == nil {
		s.byName, s.folded = map[string]int32{}, map[string]int32{}
	}
	clear(s.byName)
	clear(s.folded)
	aggs, byName, folded := s.aggs[:0], s.byName, s.folded
	var prevPath string
	a := int32(-1) // the row of the run of ops below
	// cur is aggs[a] while a run of ops of one module lasts, summed here
	// and stored back when the run ends: a local's fields are not checked
	// under the race detector, a row's were at every op (the same sums in
	// the same order).
	var cur moduleAgg
	buf := s.buf
	for i := range prog.Ops {
		op, c := &prog.Ops[i], &w.costs[i]
		if c.Fwd == 0 && c.Bwd == 0 && c.FwdCPU == 0 && c.BwdCPU == 0 && op.Flops == 0 {
			continue
		}
		if a < 0 || op.Module != prevPath { // ops of a module run together: look up once per run
			if a >= 0 {
				aggs[a] = cur
			}
			var ok bool
			if a, ok = folded[op.Module]; !ok {
				buf = appendFoldPath(buf[:0], op.Module)
				if a, ok = byName[string(buf)]; !ok { // no string made for the lookup
					name := string(buf)
					a = int32(len(aggs))
					aggs = append(aggs, moduleAgg{row: replay.ModuleTime{Name: name}})
					byName[name] = a
				}
				folded[op.Module] = a
			}
			prevPath, cur = op.Module, aggs[a]
		}
		fwd, bwd, rec := c.Fwd, c.Bwd, 0.0
		cpuB, cpuR := c.BwdCPU, 0.0
		if w.Eval {
			bwd, cpuB = 0, 0
		}
		if inRegion[i] {
			rec, cpuR = c.Fwd, c.FwdCPU
		}
		cur.row.FLOPs += m * op.Flops
		cur.row.Bytes += m * c.Bytes
		cur.row.Forward += m * fwd
		cur.row.Backward += m * bwd
		cur.row.Recompute += m * rec
		cur.byBound[c.Bound] += fwd + bwd + rec
		cur.cpuExcessF += max(0, c.FwdCPU-fwd)
		cur.cpuExcessB += max(0, cpuB+cpuR-bwd-rec)
	}
	if a >= 0 {
		aggs[a] = cur
	}
	s.aggs, s.buf = aggs[:0], buf
	// Charge each phase's launch time to the modules by their own excess.
	mb := w.Mb
	launchF := max(0, mb.ForwardCPU-mb.Forward)
	launchB := max(0, mb.BackwardCPU+mb.RecomputeCPU-mb.Backward-mb.Recompute)
	var exF, exB float64
	for i := range aggs { // in order: a sum over the map's order differed in the last bit from run to run
		exF += aggs[i].cpuExcessF
		exB += aggs[i].cpuExcessB
	}
	for _, a := range folded { // module instances: the paths folded into each row
		aggs[a].row.Count++
	}
	if len(aggs) > 0 {
		rows = make([]replay.ModuleTime, 0, len(aggs)+len(perMB))
	}
	for i := range aggs {
		a := &aggs[i]
		if exF > 0 {
			a.row.Launch += m * launchF * a.cpuExcessF / exF
		}
		if exB > 0 {
			a.row.Launch += m * launchB * a.cpuExcessB / exB
		}
		a.row.Seconds = a.row.Forward + a.row.Backward + a.row.Recompute + a.row.Launch
		best, bound := a.row.Launch/m, BoundLaunch
		for b := BoundCompute; b <= BoundLaunch; b++ {
			if a.byBound[b] > best {
				best, bound = a.byBound[b], b
			}
		}
		a.row.Bound = bound.String()
		rows = append(rows, a.row)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Seconds > rows[j].Seconds })
	for _, s := range perMB {
		switch s.Name {
		case "forward", "backward", "recompute", "launch":
			continue
		}
		rows = appendTerm(rows, s.Name, m*s.Seconds)
	}
	return rows, true
}

// appendTail adds the step's terms paid once (gpuTime.Tail) to rows.
func appendTail(rows []replay.ModuleTime, tail []replay.TimeShare) []replay.ModuleTime {
	for _, s := range tail {
		rows = appendTerm(rows, s.Name, s.Seconds)
	}
	return rows
}

// appendTerm adds a step term as a row when it takes time.
func appendTerm(rows []replay.ModuleTime, name string, sec float64) []replay.ModuleTime {
	if sec <= 0 {
		return rows
	}
	return append(rows, replay.ModuleTime{Name: name, Seconds: sec, Bound: termKind(name)})
}

// termKind is what a step term is: comm, bubble, optimizer, host or
// overhead.
func termKind(name string) string {
	switch {
	case strings.HasSuffix(name, "_comm"):
		return "comm"
	case name == "offload", name == "cpu_optimizer", name == "nvme", name == "host_sync":
		return "host"
	case name == "step_overhead":
		return "overhead"
	}
	return name
}
