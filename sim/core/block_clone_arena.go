package core

import (
	"strings"
)

// cloneArena holds slabs that cloneBlock carves its copies' names and
// value and parameter lists from: a heap allocation per slab rather than
// three per copy (a 65,536-block repeat made a quarter of
// a million). Each slab is twice the last, from the first copy's need,
// so that a model of two blocks pays no more than before. A slab's bytes
// are never written twice.
type cloneArena struct {
	names  *strings.Builder
	nameSz int
	// scratch is where cloneNames writes a copy's names before they go
	// into names (kept for the next copy).
	scratch []byte
	cuts    []int32 // where a template's module paths go (cloneNames), kept likewise
	// shared, when set, keeps the copies' names for other lowerings too
	// (ProgramBuffers.Names): a copy takes its names from it, not from
	// names.
	shared *NameTable
	vals   slab[Value]
	params slab[int32]
	// last is the copy whose names scratch holds (namesOf).
	last lastNames
	// recall is the strings join and Concat returned, in call order, in
	// the last lowering into the same buffers (ProgramBuffers): a call
	// whose text is that of the last lowering's call at the same place
	// takes that string instead of writing its bytes again. The search
	// lowers the same small programs, named alike, by the thousand (a
	// profile's slot is the same model at other degrees): written
	// afresh, their names were a tenth of BenchmarkSearchLlama70B1024's
	// bytes. Only where the bytes live differs; a lowering without
	// buffers keeps no list (on is false).
	recall recall
}

// lastNames is the copy whose names the scratch holds: its block's room
// (nil: none), its module path, where each mention of the path begins
// in the text, and the text's length.
type lastNames struct {
	room   *cloneRoom
	prefix string
	at     []int32
	n      int
}

// namesOf writes cloneNames' text for a copy of src under b.prefix into
// the scratch and returns it. When the scratch holds the copy before's,
// of the same block under a path of as many bytes (block 6 after block
// 5, "stage0.mb1.layers.5" after "stage0.mb0.layers.5"), the two texts
// differ only where the paths do, at each mention of the path: those
// bytes are rewritten, and the rest stays (appendNames wrote every byte
// of each copy's text: 35 % of a block copy's instructions in
// BenchmarkEvaluateLlama70B3D, whose copies' paths differ in one byte).
func (b *Builder) namesOf(src *blockCopy, room *cloneRoom) []byte {
	l := &b.clones.last
	if l.room == room && len(l.prefix) == len(b.prefix) && l.n <= cap(b.clones.scratch) {
		text := b.clones.scratch[:l.n]
		for j := range len(b.prefix) {
			if c := b.prefix[j]; c != l.prefix[j] {
				for _, at := range l.at {
					text[int(at)+j] = c
				}
			}
		}
		l.prefix = b.prefix
		return text
	}
	at := l.at[:0]
	text := b.appendNames(b.clones.scratch[:0], src, room, b.prefix, &at)
	*l = lastNames{room: room, prefix: b.prefix, at: at, n: len(text)}
	return text
}

// cloneSlabMax caps a slab's doubling (elements, or bytes of names).
const cloneSlabMax = 1 << 16

// cloneSlabMin is the smallest name slab: the builder names every op in
// it (Builder.join), tens of bytes at a time.
const cloneSlabMin = 512

// room returns a builder with room for n more bytes.
func (a *cloneArena) room(n int) *strings.Builder {
	if a.names == nil || a.names.Cap()-a.names.Len() < n {
		a.nameSz = max(n, min(max(2*a.nameSz, cloneSlabMin), cloneSlabMax))
		a.names = new(strings.Builder)
		a.names.Grow(a.nameSz)
	}
	return a.names
}

// recall is the last lowering's strings (last, read from at) and this
// lowering's (next, which the next lowering reads).
type recall struct {
	last, next []string
	at         int
	on         bool
}

// recallAhead is how many of the last lowering's strings a call looks
// at from the place it expects: one layout's program has calls another's
// has not (tp 2 with sequence parallelism gathers and reduce-scatters,
// and names its whys), and the calls after them still find theirs. A
// string of another length is passed over without reading its bytes.
const recallAhead = 32

// start begins a lowering's list on the last one's.
func (r *recall) start() {
	r.last, r.next = r.next, r.last[:0]
	r.at, r.on = 0, true
}

// recalled returns the string of the last lowering's call near this
// place whose text is parts joined with sep between them (sep 0: none),
// and records it as this call's; false when there is none (the caller
// writes the text and hands it to remember).
func (r *recall) recalled(sep byte, parts ...string) (string, bool) {
	if !r.on {
		return "", false
	}
	n := 0
	for k, part := range parts {
		if k > 0 && sep != 0 {
			n++
		}
		n += len(part)
	}
	for k := r.at; k < min(r.at+recallAhead, len(r.last)); k++ {
		if s := r.last[k]; len(s) == n && spells(s, sep, parts) {
			r.at = k + 1
			r.next = append(r.next, s)
			return s, true
		}
	}
	return "", false
}

// remember records s as this lowering's string at the current call.
func (r *recall) remember(s string) {
	if r.on {
		r.next = append(r.next, s)
	}
}

// spells says whether s is parts joined with sep between them (sep 0:
// none).
func spells(s string, sep byte, parts []string) bool {
	for k, part := range parts {
		if k > 0 && sep != 0 {
			if len(s) == 0 || s[0] != sep {
				return false
			}
			s = s[1:]
		}
		if len(s) < len(part) || s[:len(part)] != part {
			return false
		}
		s = s[len(part):]
	}
	return s == ""
}

// slab is the unused end of the latest slab of Ts, that slab whole, and
// its size.
type slab[T any] struct {
	free, whole []T
	size        int
}

// rewind makes the latest slab's elements free again: only when no list
// carved from it is read any more (ProgramBuffers.Recycle).
func (s *slab[T]) rewind() { s.free = s.whole }

// take returns an empty slice with room for n elements, carved from the
// slab (a new one when it has less left).
func (s *slab[T]) take(n int) []T {
	if len(s.free) < n {
		s.size = max(n, min(2*s.size, cloneSlabMax))
		s.free = make([]T, s.size)
		s.whole = s.free
	}
	out := s.free[:0:n]
	s.free = s.free[n:]
	return out
}

// renames says whether a copy of a block can rename module path from
// wherever text (a value's or buffer's why: "autocast bf16 copy of weight
// layers.3.mlp.up_proj.weight") names it or a path under it: false when
// from appears inside a longer name. It writes nothing: copyable asks it
// of every value of a block, and building the renamed text to drop it
// was a heap allocation and a copy each (cloneBlock writes the copies'
// whys from the pieces roomOf cuts).
func renames(text, from string) bool {
	for {
		i := strings.Index(text, from)
		if i < 0 {
			return true
		}
		j := i + len(from)
		if !wholePath(text, i, j) {
			return false
		}
		text = text[j:]
	}
}

// wholePath says whether text[i:j] is a whole module path or its head:
// no name character before it, and after it the end, a '.' or no name
// character.
func wholePath(text string, i, j int) bool {
	return !(i > 0 && nameByte(text[i-1])) && !(j < len(text) && text[j] != '.' && nameByte(text[j]))
}

// nameByte says whether c may appear in a module path.
func nameByte(c byte) bool {
	return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
