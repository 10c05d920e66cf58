package core

import (
	"strings"
	"sync"
)

// NameTable keeps the renamed names of copied blocks (cloneNames: every
// op's, value's, parameter's, region's, graph's and buffer's name and
// renamed why of one copy, as one string) for the lowerings that share
// it, so that a name text made once is not made again. The lowerings of
// one search make the same texts over and over: block 1 of every
// profile's two-block model, block k of every stage program of the same
// split ("stage2.mb1.layers.21..."); written afresh each time they were
// a fifth of BenchmarkSearchLlama70B1024's bytes. A copy's text is a
// function of its block's template (the text without the module path,
// and where the path goes) and of its module path: the table keeps the
// texts by template and path, so a lowering with a table makes the same
// program as one without, string for string; only where the strings'
// bytes live differs, and strings are never written. A copy whose text
// the table has writes nothing.
//
// A NameTable is safe for concurrent use; its owner (a search run) makes
// one and drops it when done: there is no package-level table. It holds
// at most nameTableMax bytes of templates, paths and texts; past that a
// copy's names are written as without a table.
type NameTable struct {
	mu        sync.Mutex
	templates map[string]*nameTemplate
	bytes     int
	limit     int // bytes of texts kept at most; 0: nameTableMax
}

// NewNameTable is a table that keeps at most limit bytes of texts (the
// zero NameTable keeps nameTableMax).
func NewNameTable(limit int) *NameTable { return &NameTable{limit: max(limit, 1)} }

// nameTableMax caps a table's texts (bytes): a search's distinct texts
// are the blocks of its stage splits (Llama 3 405B's 126 blocks in a
// few splits, some kilobytes each), well below it.
const nameTableMax = 64 << 20

// nameTemplate is a block's names with its module path left out: the
// texts of its copies, by their module path.
type nameTemplate struct {
	texts map[string]string
}

// template returns the table's entry for the template text and cuts (the
// text of module path "" and where each path goes, appendNames), nil
// when the table is full and has none. Template and cuts are one key:
// the text, the cuts as 4-byte numbers, then their count, so that no two
// templates share a key (the count and cuts are read from the end).
func (t *NameTable) template(text []byte, cuts []int32) *nameTemplate {
	key := text
	for _, c := range append(cuts, int32(len(cuts))) {
		key = append(key, byte(c), byte(c>>8), byte(c>>16), byte(c>>24))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tm, ok := t.templates[string(key)]; ok {
		return tm
	}
	if !t.room(len(key)) {
		return nil
	}
	if t.templates == nil {
		t.templates = map[string]*nameTemplate{}
	}
	tm := &nameTemplate{texts: map[string]string{}}
	t.templates[string(key)] = tm
	return tm
}

// textOf returns the text of tm's copy under module path prefix, when
// the table has it.
func (t *NameTable) textOf(tm *nameTemplate, prefix string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := tm.texts[prefix]
	return s, ok
}

// keep records text as tm's copy under prefix and returns the string
// kept; false when the table is full.
func (t *NameTable) keep(tm *nameTemplate, prefix string, text []byte) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := tm.texts[prefix]; ok { // another lowering kept it meanwhile
		return s, true
	}
	if !t.room(len(prefix) + len(text)) {
		return "", false
	}
	s := string(text)
	tm.texts[strings.Clone(prefix)] = s // not the lowering's name slab, which the key would keep
	return s, true
}

// room says whether n more bytes fit under the table's limit, and counts
// them when they do.
func (t *NameTable) room(n int) bool {
	limit := t.limit
	if limit == 0 {
		limit = nameTableMax
	}
	if t.bytes+n > limit {
		return false
	}
	t.bytes += n
	return true
}
