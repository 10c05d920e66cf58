package alloc

import (
	"math/rand/v2"
	"testing"
)

// An allocator carving its blocks and segments from slabs another left
// (Reuse, Slabs) answers every request as a new one does: the same
// blocks, addresses, sizes and figures after each request and release,
// whatever the first allocator's requests were, over two generations of
// slabs, for the caching allocator and expandable segments.
func TestReusedSlabsAllocateAsNew(t *testing.T) {
	run := func(a *Allocator, seed uint64, steps int, observe func(step int, b *Block, ok bool)) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var live []*Block
		for step := range steps {
			if len(live) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(live))
				a.Release(live[i])
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				observe(step, nil, true)
				continue
			}
			n := int64(rng.IntN(1<<22)) + 1
			if rng.IntN(4) == 0 {
				n = int64(rng.IntN(4096)) + 1 // the small pool
			}
			b, ok := a.AllocOn(n, Stream(rng.IntN(2)))
			if ok {
				live = append(live, b)
			}
			observe(step, b, ok)
		}
	}
	type state struct {
		allocated, reserved, addr, size int64
		ok                              bool
	}
	for _, expandable := range []bool{false, true} {
		var want []state
		fresh := &Allocator{Limit: 1 << 30, Expandable: expandable}
		run(fresh, 7, 3000, func(_ int, b *Block, ok bool) {
			s := state{allocated: fresh.Allocated, reserved: fresh.Reserved, ok: ok}
			if b != nil {
				s.addr, s.size = fresh.Addr(b), b.Size
			}
			want = append(want, s)
		})
		// Slabs from other requests, handed on twice.
		var slabs Slabs
		for gen, seed := range []uint64{11, 12} {
			prev := &Allocator{Limit: 1 << 30, Expandable: expandable}
			prev.Reuse(slabs)
			run(prev, seed, 2000+1000*gen, func(int, *Block, bool) {})
			slabs = prev.Slabs()
		}
		if len(slabs.blocks) == 0 {
			t.Fatal("no slabs handed on")
		}
		a := &Allocator{Limit: 1 << 30, Expandable: expandable}
		a.Reuse(slabs)
		run(a, 7, 3000, func(step int, b *Block, ok bool) {
			s := state{allocated: a.Allocated, reserved: a.Reserved, ok: ok}
			if b != nil {
				s.addr, s.size = a.Addr(b), b.Size
			}
			if s != want[step] {
				t.Fatalf("expandable %v, step %d: %+v on reused slabs, %+v on new ones", expandable, step, s, want[step])
			}
		})
	}
}
