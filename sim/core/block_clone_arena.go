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

// slab is the unused end of the latest slab of Ts, and that slab's size.
type slab[T any] struct {
	free []T
	size int
}

// take returns an empty slice with room for n elements, carved from the
// slab (a new one when it has less left).
func (s *slab[T]) take(n int) []T {
	if len(s.free) < n {
		s.size = max(n, min(2*s.size, cloneSlabMax))
		s.free = make([]T, s.size)
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
