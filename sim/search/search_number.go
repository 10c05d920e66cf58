package search

import (
	"context"

	"github.com/memsh/memsh/sim/core"
)

// checkAll has the plan check every layout (the model's own checks
// passed in fastPathSupported) and returns the valid ones, by index into
// layouts, and the refused ones' counts by reason. Each worker counts
// the refusals it met; a layout's refusal is kept as a flag, not its
// reason (a string a layout, 1.8 MB of BenchmarkSearchLlama70B1024's
// 113,000 layouts), and the valid list is made once at its length.
func (sp *Space) checkAll(ctx context.Context, base *core.Plan, layouts []layout, progress func(int)) ([]int, map[string]int, error) {
	refused := make([]bool, len(layouts))
	known := make([]reasons, max(sp.Workers, 1))          // each worker's reason classes
	counted := make([]map[string]int, max(sp.Workers, 1)) // and counts
	memos := make([]core.LayoutMemo, max(sp.Workers, 1))  // and verdicts of its last layout (its next plans differ in checkpointing)
	parallelChunks(ctx, sp.Workers, len(layouts), cheapChunk, progress, func(w, i int) {
		var p core.Plan
		sp.planInto(&p, base, layouts[i])
		if err := p.RefusalIn(base.Model, &memos[w]); err != nil { // its class alone is read: worded once per class
			if counted[w] == nil {
				counted[w] = map[string]int{}
			}
			counted[w][known[w].of(err)]++
			refused[i] = true
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	counts := map[string]int{}
	n := len(layouts)
	for _, c := range counted {
		for why, k := range c {
			counts[why] += k
			n -= k
		}
	}
	valid := make([]int, 0, n)
	for i, r := range refused {
		if !r {
			valid = append(valid, i)
		}
	}
	return valid, counts, nil
}

// shapeKey is a shape: a profile (by index into numbering's keys) and a
// pipeline split.
type shapeKey struct {
	profile int32
	pp, v   int64
	split   splitKind
}

// outside is what the memory outside the allocator (NCCL's buffers, the
// context) depends on: the degrees and the sharding only.
type outside struct {
	dp, tp, pp, cp, ep, rep int64
	sharding                int
	cpMode                  cpMode
	wholeExperts            bool // the expert groups' sizes (replay's nccl_megatron.go)
	offload                 offloadKind
}

func outsideOf(l layout) outside {
	return outside{l.dp, l.tp, l.pp, l.cp, l.ep, l.rep, l.sharding, l.cpMode, l.wholeExperts, l.offload}
}

// numbering is each valid layout's profile, shape and memory outside the
// allocator, by index into keys, the shapes and outsideFirst: the maps
// find them once, and Run's passes over the layouts hash no key.
type numbering struct {
	profileAt, shapeAt, outsideAt []int32 // by index into valid
	keys                          []profileKey
	partsOf                       []profileParts // the units each profile's layouts read
	firstOf                       []*core.Plan   // a plan of each profile
	shapes                        int
	// A layout of each shape, by index into layouts: its layout is made
	// again when the shape is (planOf), rather than kept, 336 bytes a
	// shape, for the hundreds of thousands of shapes of a large space.
	shapeFirst   []int32
	shapeProfile []int32 // the profile of each shape
	outsideFirst []int32 // a layout of each memory outside the allocator, by index into layouts
}

// numberChunk is how many layouts' profile keys number works out at a
// time (a profile key is 72 bytes: a list of them all was 4 MB of the
// 70B search's bytes).
const numberChunk = 4096

// number numbers the valid layouts' profiles, shapes and memories
// outside the allocator, each in the order of its first layout. Each
// layout's profile key and the units it reads are worked out on the
// workers, numberChunk layouts at a time; the loop after them numbers
// them in order (the maps), as one loop over the layouts did.
func (sp *Space) number(ctx context.Context, base *core.Plan, layouts []layout, valid []int) (*numbering, error) {
	nb := &numbering{profileAt: make([]int32, len(valid)), shapeAt: make([]int32, len(valid)), outsideAt: make([]int32, len(valid))}
	profiles := map[profileKey]int32{}
	shapes := map[shapeKey]int32{}
	outsides := map[outside]int32{}
	keyAt, partsAt := make([]profileKey, min(len(valid), numberChunk)), make([]profileParts, min(len(valid), numberChunk))
	for lo := 0; lo < len(valid); lo += numberChunk {
		chunk := valid[lo:min(lo+numberChunk, len(valid))]
		parallelForCheap(ctx, sp.Workers, len(chunk), nil, func(j int) {
			l := layouts[chunk[j]]
			var p core.Plan
			sp.planInto(&p, base, l)
			keyAt[j], partsAt[j] = sp.keyOf(&p, l), partsFor(p.Parallel)
		})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for c, i := range chunk {
			j, l, k := lo+c, layouts[i], keyAt[c]
			pi, ok := profiles[k]
			if !ok {
				pi = int32(len(nb.keys))
				profiles[k] = pi
				first := sp.plan(base, l)
				if l.offload.timedByReplay() { // the profile sums the lowering, which the offload does not change; its time is the replay's (exact)
					first.Offload = base.Offload
				}
				nb.keys, nb.firstOf, nb.partsOf = append(nb.keys, k), append(nb.firstOf, first), append(nb.partsOf, 0)
			}
			nb.partsOf[pi] |= partsAt[c]
			nb.profileAt[j] = pi
			sk := shapeKey{pi, l.pp, l.v, l.split}
			si, ok := shapes[sk]
			if !ok {
				si = int32(nb.shapes)
				shapes[sk] = si
				nb.shapes++
				nb.shapeFirst, nb.shapeProfile = append(nb.shapeFirst, int32(i)), append(nb.shapeProfile, pi)
			}
			nb.shapeAt[j] = si
			o := outsideOf(l)
			oi, ok := outsides[o]
			if !ok {
				oi = int32(len(nb.outsideFirst))
				outsides[o] = oi
				nb.outsideFirst = append(nb.outsideFirst, int32(i))
			}
			nb.outsideAt[j] = oi
		}
	}
	return nb, nil
}
