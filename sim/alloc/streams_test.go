package alloc

import "testing"

// TestStreamPools: a block serves only the stream that allocated its
// segment (get_free_block compares the stream first), so a request of
// another stream opens a segment of its own even when a cached block fits.
func TestStreamPools(t *testing.T) {
	const mib = 1 << 20
	for _, expandable := range []bool{false, true} {
		a := Allocator{Expandable: expandable}
		x, _ := a.AllocOn(30*mib, 1) // stream 1: a 30 MiB segment (2 pages of 20 when expandable: 40)
		a.Release(x)
		y, _ := a.AllocOn(30*mib, DefaultStream) // cached 30 MiB on stream 1 does not serve stream 0
		seg := int64(30 * mib)
		if expandable {
			seg = 40 * mib
		}
		if a.Reserved != 2*seg || a.ReservedOn(1) != seg || a.ReservedOn(DefaultStream) != seg {
			t.Errorf("expandable=%v: reserved %d (stream 0 %d, stream 1 %d), want %d on each", expandable, a.Reserved/mib, a.ReservedOn(0)/mib, a.ReservedOn(1)/mib, seg/mib)
		}
		if y.Stream() != DefaultStream || x.Stream() != 1 {
			t.Errorf("expandable=%v: blocks on streams %d and %d, want 0 and 1", expandable, y.Stream(), x.Stream())
		}
		z, _ := a.AllocOn(30*mib, 1) // stream 1 reuses its own cached block
		if z != x || a.Reserved != 2*seg {
			t.Errorf("expandable=%v: stream 1 did not reuse its block (reserved %d MiB)", expandable, a.Reserved/mib)
		}
		checkAllocator(t, &a, []*Block{y, z})
	}
}

// TestRecordStream: a block used on another stream stops counting as
// allocated when it is released, but is reused only once that stream has
// done the work issued until the release (insert_events, process_events);
// releasing the cache first waits for every stream
// (synchronize_and_free_events).
func TestRecordStream(t *testing.T) {
	const mib = 1 << 20
	var a Allocator
	g, _ := a.AllocOn(12*mib, DefaultStream) // a gradient: a segment of its own (>= 10 MiB: rounded to 2 MiB)
	a.RecordStream(g, 2)                     // read by a reduce-scatter on stream 2
	a.RecordStream(g, DefaultStream)         // its own stream: no record
	if u := a.uses[g]; len(u) != 1 || u[0] != 2 {
		t.Fatalf("uses %v, want stream 2 only", u)
	}
	a.Release(g)
	freed := a.Mark()
	if a.Allocated != 0 || a.Pending() != 12*mib {
		t.Fatalf("after release: allocated %d, pending %d MiB; want 0 and 12", a.Allocated, a.Pending()/mib)
	}
	if on2, on1 := a.PendingOn(2), a.PendingOn(1); on2 != 12*mib || on1 != 0 {
		t.Fatalf("pending on stream 2 %d MiB, on stream 1 %d MiB; want 12 and 0", on2/mib, on1/mib)
	}
	// The next gradient cannot take the pending block: a second segment.
	h, _ := a.AllocOn(12*mib, DefaultStream)
	if h == g || a.Reserved != 24*mib {
		t.Fatalf("a pending block was reused (reserved %d MiB)", a.Reserved/mib)
	}
	a.Synchronize(2, freed-1) // stream 2 is not yet at the release
	if a.Pending() != 12*mib {
		t.Fatalf("synchronized short of the release: pending %d MiB, want 12", a.Pending()/mib)
	}
	a.Synchronize(2, freed)
	if a.Pending() != 0 {
		t.Fatalf("after stream 2 caught up: pending %d MiB, want 0", a.Pending()/mib)
	}
	k, _ := a.AllocOn(12*mib, DefaultStream)
	if k != g || a.Reserved != 24*mib {
		t.Fatalf("the freed block was not reused (reserved %d MiB)", a.Reserved/mib)
	}
	checkAllocator(t, &a, []*Block{h, k})

	// Under a limit, the out-of-memory path frees pending blocks first,
	// and releases the segments they leave wholly free.
	b := Allocator{Limit: 60 * mib}
	x, _ := b.AllocOn(30*mib, DefaultStream)
	b.RecordStream(x, 1)
	b.Release(x)
	y, ok := b.AllocOn(40*mib, DefaultStream) // 30 + 40 > 60: release x's segment
	if !ok || b.Reserved != 40*mib || b.Pending() != 0 {
		t.Fatalf("OOM path: ok %v, reserved %d MiB, pending %d; want a fit at 40 MiB", ok, b.Reserved/mib, b.Pending()/mib)
	}
	checkAllocator(t, &b, []*Block{y})
}

// TestFreeCompletedObserved: the observer sees a deferred free complete,
// with the block, after the allocation and the release.
func TestFreeCompletedObserved(t *testing.T) {
	var kinds []string
	a := Allocator{}
	a.Observe = func(e SegmentEvent) { kinds = append(kinds, e.Kind) }
	b, _ := a.AllocOn(4096, 1)
	a.RecordStream(b, 0)
	a.Release(b)
	a.Synchronize(0, a.Mark())
	want := []string{SegmentAlloc, FreeCompleted}
	if len(kinds) != 2 || kinds[0] != want[0] || kinds[1] != want[1] {
		t.Errorf("events %v, want %v", kinds, want)
	}
	segs := a.Segments()
	if len(segs) != 1 || segs[0].Stream != 1 || segs[0].Blocks[0].InUse || segs[0].Blocks[0].Pending {
		t.Errorf("segments %+v: want one free block on stream 1", segs)
	}
}

// TestReleaseCachedPastOOM: before the OOM a request that does not fit
// releases every stream's cached segments (release_cached_blocks); past
// it, where the replay only goes on to report what the step needs, a
// request releases its own stream's alone and the other streams keep
// their cache.
func TestReleaseCachedPastOOM(t *testing.T) {
	const mib = 1 << 20
	for _, expandable := range []bool{false, true} {
		// Sizes are multiples of 20 MiB, the large pool's page, so the
		// segments and the mapped pages hand-count alike.
		a := Allocator{Limit: 70 * mib, Expandable: expandable}
		c, _ := a.AllocOn(20*mib, 1) // stream 1: 20 MiB, released: cached on stream 1
		a.Release(c)
		x, ok := a.AllocOn(60*mib, DefaultStream) // 20 + 60 > 70: stream 1's cache goes
		if !ok || a.Reserved != 60*mib || a.ReservedOn(1) != 0 {
			t.Fatalf("expandable=%v: before the OOM: ok %v, reserved %d MiB (stream 1 %d), want a fit at 60 and stream 1 released", expandable, ok, a.Reserved/mib, a.ReservedOn(1)/mib)
		}
		y, ok := a.AllocOn(20*mib, DefaultStream) // 60 + 20 > 70 and nothing cached: the OOM, granted
		if ok || a.FailReserved != 60*mib || a.Reserved != 80*mib {
			t.Fatalf("expandable=%v: the OOM: ok %v, fail reserved %d, reserved %d MiB; want false, 60, 80", expandable, ok, a.FailReserved/mib, a.Reserved/mib)
		}
		a.Release(y)                 // 20 MiB cached on stream 0
		z, _ := a.AllocOn(20*mib, 1) // past the OOM: stream 1 releases its own cache only
		if a.ReservedOn(DefaultStream) != 80*mib || a.ReservedOn(1) != 20*mib || a.Reserved != 100*mib {
			t.Errorf("expandable=%v: past the OOM: reserved %d MiB (stream 0 %d, stream 1 %d), want 100 (80, 20)", expandable, a.Reserved/mib, a.ReservedOn(DefaultStream)/mib, a.ReservedOn(1)/mib)
		}
		w, _ := a.AllocOn(20*mib, DefaultStream) // stream 0 reuses its cached 20 MiB
		if a.Reserved != 100*mib {
			t.Errorf("expandable=%v: stream 0 did not reuse its cache (reserved %d MiB)", expandable, a.Reserved/mib)
		}
		checkAllocator(t, &a, []*Block{x, z, w})
	}
}
