package alloc

// SegmentInfo is a segment as it stands: its address, size (the mapped
// bytes of an expandable segment) and blocks in address order.
type SegmentInfo struct {
	Addr, Size int64
	Small      bool // the small pool (requests up to 1 MiB)
	Expandable bool
	Stream     Stream
	Blocks     []BlockInfo
}

// BlockInfo is a block of a segment: in use, released but waiting for
// the streams that used it (pending), or cached (free).
type BlockInfo struct {
	Addr, Size int64
	InUse      bool
	Pending    bool
	block      *Block
}

// Block is the allocator's block, for matching it to its tensor.
//
//go:norace
func (b BlockInfo) Block() *Block { return b.block }

// Segments lists the live segments in creation order, with their mapped
// blocks: what a memory snapshot records as the allocator's final state.
//
//go:norace
func (a *Allocator) Segments() []SegmentInfo {
	var out []SegmentInfo
	for i := range a.segs {
		seg := &a.segs[i]
		if seg.released {
			continue
		}
		info := SegmentInfo{Addr: seg.base, Small: seg.pool == 0, Expandable: seg.expandable, Stream: seg.stream}
		for r := seg.first; r != 0; {
			b := a.at(r)
			r = b.next
			if b.unmapped {
				continue
			}
			info.Size += b.Size
			info.Blocks = append(info.Blocks, BlockInfo{Addr: seg.base + b.off, Size: b.Size, InUse: !b.free && !b.pending, Pending: b.pending, block: b})
		}
		if info.Size > 0 {
			out = append(out, info)
		}
	}
	return out
}
