package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// What nvidia-smi shows (Report.DeviceUsed) and its rows (Report.Breakdown).
//
// A step's allocations go to several streams (streams.go), each with its
// own pools. A side stream's segments stay cached between steps and never
// serve the compute stream, so from the second step on they are reserved
// beside everything the compute stream reserves: the steady state's peak
// reserved memory is the compute stream's peak plus every side stream's
// peak (the replay, which starts from an empty allocator, sees the side
// streams' segments only once the step makes them). Cached segments go
// back to the device before an out-of-memory, so that sum never exceeds
// what the allocator may reserve.

// streamUse is one stream's allocated and reserved bytes.
type streamUse struct{ allocated, reserved int64 }

// steadyReserved is the peak reserved memory of a step after the first:
// the compute stream's peak plus every side stream's, at most the
// allocator's limit (or the replay's own peak, when that is higher).
func (r *Replay) steadyReserved() int64 {
	steady := int64(0)
	for s := 0; s < r.alloc.Streams(); s++ {
		steady += r.alloc.PeakReservedOn(alloc.Stream(s))
	}
	peak := r.Rep.PeakReserved
	if steady <= peak {
		return peak
	}
	return min(steady, max(peak, r.alloc.Limit))
}

// streamPeaks is each stream's most reserved at once, by name.
func (r *Replay) streamPeaks() []Share {
	var out []Share
	for s := 0; s < r.alloc.Streams(); s++ {
		if peak := r.alloc.PeakReservedOn(alloc.Stream(s)); s == 0 || peak > 0 {
			out = append(out, Share{Name: StreamName(alloc.Stream(s)), Bytes: peak})
		}
	}
	return out
}

// deviceBreakdown is the rows of device memory at the peak of allocated
// memory: the categories of what is allocated, the compute stream's
// cached blocks (fragmentation), each side stream's cached segments
// (what it reserves at its fullest less what it holds at the peak, at
// most what the steady state's reserve leaves), then every term outside
// PyTorch's allocator by name (the overheads: the CUDA context, each NCCL
// communicator).
func (r *Replay) deviceBreakdown() []Share {
	rep := r.Rep
	out := make([]Share, 0, int(core.NumCategories)+numStreams+len(rep.Overheads))
	for c := core.Category(0); c < core.NumCategories; c++ {
		out = append(out, Share{Name: c.String(), Bytes: rep.peakCat[c]})
	}
	compute := rep.peakStream[StreamCompute]
	out = append(out, Share{Name: "fragmentation", Bytes: compute.reserved - compute.allocated})
	room := rep.PeakReserved - compute.reserved
	for s := StreamCompute + 1; s < numStreams; s++ {
		room -= rep.peakStream[s].allocated
	}
	for s := StreamCompute + 1; s < numStreams; s++ {
		peak := r.alloc.PeakReservedOn(s)
		if peak == 0 {
			continue
		}
		cached := min(max(peak-rep.peakStream[s].allocated, 0), max(room, 0))
		room -= cached
		name := StreamName(s) + "_stream"
		if s == StreamGraphPool {
			name = StreamName(s)
		}
		out = append(out, Share{Name: name, Bytes: cached})
	}
	for _, o := range rep.Overheads {
		out = append(out, Share{Name: o.Name, Bytes: o.Bytes})
	}
	return out
}

// Categories are the breakdown's rows of allocated memory (params to
// comm): they sum to PeakAllocated.
func (r *Report) Categories() []Share {
	return r.Breakdown[:min(len(r.Breakdown), int(core.NumCategories))]
}

// Overheads is the device memory outside PyTorch's allocator for plan p:
// the CUDA context (with the plan's module loading), then NCCL's buffers
// per communicator (nccl.go).
func Overheads(p *core.Plan) []Overhead {
	dev := p.Device
	eager := p.RuntimeMemory.ModuleLoading == "eager"
	bytes, basis := dev.ContextFigure(eager, p.Runtime.CurrentStack)
	var groups []commGroup
	if p.Parallel.Active() {
		groups = commGroups(p)
	}
	out := make([]Overhead, 1, 1+len(groups)) // made at its length: a replay's, and every layout's of a search
	out[0] = Overhead{Name: "cuda_context", Bytes: bytes, ctx: contextHow{on: true, device: dev.Name, catalog: dev.Source, eager: eager, basis: basis}}
	for _, g := range groups {
		out = append(out, commOverhead(p, g))
	}
	return out
}

// contextHow is what the CUDA context's source is worded from: the GPU's
// name and catalog source, the module loading and the figure
// ContextFigure took.
type contextHow struct {
	on              bool   // the overhead is the context's
	device, catalog string // the GPU's name and its catalog entry's source
	eager           bool
	basis           hw.ContextBasis
}

// source is the CUDA context's source (Overhead.Source).
func (c contextHow) source() string {
	loading := "lazy module loading (CUDA_MODULE_LOADING=LAZY)"
	if c.eager {
		loading = "eager module loading"
	}
	src := "CUDA context and loaded kernels for " + c.device + " with " + loading + " (" + c.catalog
	switch {
	case c.basis.MeasuredEager():
		src += "; measured with eager module loading"
	case c.eager:
		src += fmt.Sprintf("; %s of eager module loading added, pytorch/pytorch#86509", units.FormatBytes(hw.EagerModuleBytes))
	}
	if c.basis.Current() {
		src += "; measured with torch 2.11 and CUDA 13.0"
	}
	return src + ")"
}
