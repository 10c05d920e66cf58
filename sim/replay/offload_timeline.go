package replay

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
)

// The offload timeline: what torchtune's OffloadActivations issues on its
// copy stream and what the compute stream runs around it, in the order of
// the replay, for the time model to overlap (sim/timing/offload.go). Only
// offload(activations="cpu") records one; save_on_cpu's copies (anemoi's
// cpu_offload) run on the compute stream and are timed as exposed.

// OffloadEventKind is what an OffloadEvent is.
type OffloadEventKind uint8

// The kinds of offload events.
const (
	EvRecompute OffloadEventKind = iota // op Op's forward, run again by its region's recompute
	EvBackward                          // op Op's backward
	EvCopyIn                            // Bytes copied back from the host before the next backward op (unpack)
)

// OffloadEvent is one entry of the backward's timeline.
type OffloadEvent struct {
	Kind  OffloadEventKind
	Op    int32
	Bytes int64
}

// CopyOut is one tensor copied to the host in the forward: issued after
// forward op After ran (-1: before the first op), as torchtune's pack
// hook does when the op that saves it records it.
type CopyOut struct {
	After int32
	Bytes int64
}

// OffloadTimeline is the step's torchtune activation offload as the time
// model needs it: the copies to the host in forward order of their
// issue, and the backward's ops and copies back in replay order. Both are
// nil without offload(activations="cpu").
func (r *Replay) OffloadTimeline() (outs []CopyOut, backward []OffloadEvent) {
	if r.off == nil {
		return nil, nil
	}
	outs = slices.Clone(r.off.outs)
	slices.SortStableFunc(outs, func(a, b CopyOut) int { return int(a.After - b.After) })
	return outs, r.off.events
}

// OffloadedPCIe is the bytes torchtune's activation offload moves over
// PCIe in one micro-batch, both ways (part of Report.Traffic.PCIe).
func (r *Replay) OffloadedPCIe() int64 {
	if r.off == nil {
		return 0
	}
	return r.off.actPCIe
}

// recordCopyOut notes v's copy to the host, issued where torchtune packs
// it (packOp).
func (r *Replay) recordCopyOut(v core.Value, done int) {
	fo := r.fo()
	fo.outs = append(fo.outs, CopyOut{After: r.packOp(v, done), Bytes: r.P.Values[v].Bytes})
	fo.actPCIe += 2 * r.P.Values[v].Bytes
}

// packOp is the forward op after which torchtune's pack hook copies v:
// the first op from its producer on that saves it, or, for the input of a
// checkpointed region, the op before the region (the checkpoint saves its
// inputs as it is entered: _NoopSaveInputs, torch/utils/checkpoint.py);
// done, where its forward use ends, when none is found.
func (r *Replay) packOp(v core.Value, done int) int32 {
	p := r.P
	from := max(p.Values[v].Producer, 0)
	for j := int(from); j <= done && j < len(p.Ops); j++ {
		op := &p.Ops[j]
		if r.savesOnItsOwn(op) && slices.Contains(op.Saved, v) || r.keeps(op) && slices.Contains(op.Out, v) {
			return int32(j)
		}
		if op.Region != 0 && slices.Contains(op.In, v) {
			chain := p.Ancestors(op.Region)
			reg := &p.Regions[chain[len(chain)-1]-1]
			if pr := p.Values[v].Producer; pr < reg.First || pr >= reg.End {
				return reg.First - 1
			}
		}
	}
	return int32(done)
}

// recordEvent appends a backward timeline event when torchtune's offload
// is on.
func (r *Replay) recordEvent(e OffloadEvent) {
	if r.off == nil || r.off.outs == nil || !r.actsOffloaded() {
		return
	}
	r.off.events = append(r.off.events, e)
}
