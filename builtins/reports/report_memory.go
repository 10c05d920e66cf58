package reports

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// Where device memory goes beyond the allocated bytes: the whole
// breakdown of device_used, and why the caching allocator holds free
// blocks (fragmentation).

// breakdown is device_used by cause, summing to it: the engine's
// categories at the peak of allocated memory with the fragmentation and
// the context, then paged optimizer state (unified memory, outside the
// allocator) and the reserve grown after that peak ("reserved later").
// The last two are 0 when there is none; print(r) leaves such rows out.
func (x *Report) breakdown() []replay.Share {
	r := x.r
	out := append([]replay.Share(nil), r.Breakdown...)
	var sum int64
	for _, s := range out {
		sum += s.Bytes
	}
	paged := pagedState(x.plan.P, r)
	later := max(r.DeviceUsed-sum-paged, 0)
	return append(out, replay.Share{Name: "paged_optimizer", Bytes: paged}, replay.Share{Name: "reserved_later", Bytes: later})
}

func breakdownField(x *Report, _ bool) starlark.Value {
	shares := x.breakdown()
	d := starlark.NewDict(len(shares))
	for _, s := range shares {
		_ = d.SetKey(starlark.String(s.Name), starlark.MakeInt64(s.Bytes))
	}
	d.Freeze()
	return d
}

// fragmentationField is r.fragmentation: the free blocks the allocator
// held at the peak of allocated memory (the breakdown's fragmentation),
// and the request after which the reserve reached its peak, with what was
// cached then in its pool.
func fragmentationField(x *Report, plain bool) starlark.Value {
	f := x.r.Frag
	free := cacheAtPeak(f)
	fields := starlark.StringDict{
		"free_blocks":  starlark.MakeInt(free.Blocks),
		"free_bytes":   starlark.MakeInt64(free.Bytes),
		"largest_free": starlark.MakeInt64(free.Largest),
		"peak_growth":  starlark.None,
	}
	if g := f.PeakGrowth; g != nil {
		a := g.Alloc
		fields["peak_growth"] = host.Record(plain, starlark.StringDict{
			"tensor": starlark.String(a.Tensor), "op": starlark.String(a.Op), "phase": starlark.String(a.Phase.String()),
			"bytes":          starlark.MakeInt64(g.Growth.Request),
			"cached_blocks":  starlark.MakeInt(g.Growth.Cache.Blocks),
			"cached_bytes":   starlark.MakeInt64(g.Growth.Cache.Bytes),
			"largest_cached": starlark.MakeInt64(g.Growth.Cache.Largest),
			"reserved":       starlark.MakeInt64(g.Reserved),
		})
	}
	return host.Record(plain, fields)
}

// cacheAtPeak is both pools' free blocks at the peak of allocated memory.
func cacheAtPeak(f replay.Fragmentation) alloc.Cache {
	s, l := f.AtPeak[0], f.AtPeak[1]
	return alloc.Cache{Blocks: s.Blocks + l.Blocks, Bytes: s.Bytes + l.Bytes, Largest: max(s.Largest, l.Largest)}
}

// describeFragmentation is print(r)'s account of the reserve beyond the
// allocated bytes: the free blocks at the peak, and the request that grew
// the reserve last, with the cached blocks it could not use.
func (x *Report) describeFragmentation(d *host.TextGrid) {
	f := x.r.Frag
	if free := cacheAtPeak(f); free.Bytes > 0 {
		d.Add("free blocks", fmt.Sprintf("%s cached in %s at the peak (the fragmentation row), the largest %s",
			units.FormatBytes(free.Bytes), blocks(free.Blocks), units.FormatBytes(free.Largest)))
	}
	g := f.PeakGrowth
	if g == nil {
		return
	}
	c := g.Growth.Cache
	why := "only " + units.FormatBytes(c.Bytes) + " was cached then"
	if c.Bytes >= g.Growth.Request {
		why = fmt.Sprintf("%s was cached then, in %s of at most %s: none large enough", units.FormatBytes(c.Bytes), blocks(c.Blocks), units.FormatBytes(c.Largest))
	}
	line := fmt.Sprintf("last, to %s, for %s (%s, %s): %s",
		units.FormatBytes(g.Reserved), g.Alloc.Tensor, units.FormatBytes(g.Growth.Request), g.Alloc.Phase, why)
	if r := x.r; r.PeakReserved > g.Reserved {
		// The replay's own peak is g.Reserved: only a new segment raises
		// the reserve. The report's is the steady step's
		// (replay.steadyReserved), each side stream's segments cached
		// beside the compute stream's, at most the allocator's limit.
		line += fmt.Sprintf("; peak reserved is more, %s: from the second step on each side stream keeps its cached segments beside the compute stream's", units.FormatBytes(r.PeakReserved))
		if r.PeakReserved >= r.Capacity-nonTorch(r) {
			line += ", up to the card's limit"
		}
	}
	d.Add("reserve grew", line)
}

// nonTorch is the device memory outside PyTorch's allocator: the
// allocator's limit is the capacity less it.
func nonTorch(r *replay.Report) int64 {
	var n int64
	for _, o := range r.Overheads {
		n += o.Bytes
	}
	return n
}

// describeRetries is print(r)'s line for the requests the allocator
// retried after releasing its cache at the card's limit (r.alloc_retries,
// PyTorch's num_alloc_retries). Each release frees every cached segment
// with cudaFree, which waits for the device: DeepSpeed's ZeRO-3 step warns
// of them as "pytorch allocator cache flushes since last step ... detrimental
// to performance" (deepspeed/runtime/zero/stage3.py, step). A step that
// does not fit has its OOM message instead: its last retry is the OOM.
func (x *Report) describeRetries(d *host.TextGrid) {
	n := x.r.AllocRetries
	if n == 0 || x.r.OOM != nil {
		return
	}
	times := "1 time"
	if n > 1 {
		times = host.Thousands(int64(n)) + " times"
	}
	fix := "expandable_segments=True, a smaller batch or more headroom can avoid it"
	if x.plan.P.ExpandableSegments {
		fix = "a smaller batch or more headroom can avoid it"
	}
	d.Add("cache released", fmt.Sprintf("%s at the card's limit: a request found no room, so the allocator freed its cached segments (cudaFree, which waits for the device) and retried "+
		"(num_alloc_retries in torch.cuda.memory_stats(); DeepSpeed warns of these cache flushes). Each stalls the step, which step_time does not count; %s", times, fix))
}

func blocks(n int) string {
	if n == 1 {
		return "1 free block"
	}
	return host.Thousands(int64(n)) + " free blocks"
}

// Throughput: tokens per second for a language model, samples per second
// for every model. A weather model has no tokens: its throughput is in
// samples (input states, each with all its ensemble members).

// hasTokens says whether the model reads tokens: not a graph model over
// grid points.
func (x *Report) hasTokens() bool { return x.plan.P.Model.Points == 0 }

// samplesPerS is samples per second over all data-parallel replicas:
// the time model's tokens per second over the tokens of one sample (its
// sequence, for each ensemble member; a graph model's plan counts one
// token per member).
func (x *Report) samplesPerS() float64 {
	p := x.plan.P
	return x.r.Time.TokensPerS / float64(max(p.Seq, 1)*max(p.Members, 1))
}

// describeThroughput is "7,659 tokens/s", or "0.0845 samples/s" for a
// model without tokens.
func (x *Report) describeThroughput() string {
	if x.hasTokens() {
		return host.Thousands(int64(x.r.Time.TokensPerS+0.5)) + " tokens/s"
	}
	s := x.samplesPerS()
	if s >= 100 {
		return host.Thousands(int64(s+0.5)) + " samples/s"
	}
	return fmt.Sprintf("%.3g samples/s", s)
}
