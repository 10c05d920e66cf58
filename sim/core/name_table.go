package core

import "sync"

// NameTable keeps the renamed names of copied blocks (cloneNames: every
// op's, value's, parameter's, region's, graph's and buffer's name and
// renamed why of one copy, as one string) for the lowerings that share
// it, so that a name text made once is not made again. The lowerings of
// one search make the same texts over and over: block 1 of every
// profile's two-block model, block k of every stage program of the same
// split ("stage2.mb1.layers.21..."); written afresh each time they were
// a fifth of BenchmarkSearchLlama70B1024's bytes. A text is looked up by
// its bytes, so a lowering with a table makes the same program as one
// without, string for string; only where the strings' bytes live
// differs, and strings are never written.
//
// A NameTable is safe for concurrent use; its owner (a search run) makes
// one and drops it when done: there is no package-level table. It holds
// at most nameTableMax bytes of texts; past that a copy's names are
// written as without a table.
type NameTable struct {
	mu    sync.Mutex
	texts map[string]string
	bytes int
	limit int // bytes of texts kept at most; 0: nameTableMax
}

// NewNameTable is a table that keeps at most limit bytes of texts (the
// zero NameTable keeps nameTableMax).
func NewNameTable(limit int) *NameTable { return &NameTable{limit: max(limit, 1)} }

// nameTableMax caps a table's texts (bytes): a search's distinct texts
// are the blocks of its stage splits (Llama 3 405B's 126 blocks in a
// few splits, some kilobytes each), well below it.
const nameTableMax = 64 << 20

// text returns a string equal to text, the one the table keeps when it
// has one or can keep one; false when it is full and has none.
func (t *NameTable) text(text []byte) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.texts[string(text)]; ok {
		return s, true
	}
	limit := t.limit
	if limit == 0 {
		limit = nameTableMax
	}
	if t.bytes+len(text) > limit {
		return "", false
	}
	if t.texts == nil {
		t.texts = map[string]string{}
	}
	s := string(text)
	t.texts[s] = s
	t.bytes += len(s)
	return s, true
}
