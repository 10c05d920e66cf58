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

// renamePaths replaces module path from, where a text names it or a path
// under it ("autocast bf16 copy of weight layers.3.mlp.up_proj.weight"),
// by to. It says false when from appears inside a longer name, which a
// copy could not rename.
func renamePaths(text, from, to string) (string, bool) {
	if !strings.Contains(text, from) {
		return text, true
	}
	var out strings.Builder
	out.Grow(len(text) + strings.Count(text, from)*max(len(to)-len(from), 0))
	if !writeRenamed(&out, text, from, to) {
		return "", false
	}
	return out.String(), true
}

// writeRenamed writes text to out with from renamed to, as renamePaths
// does; false (and some of text written) when from appears inside a
// longer name.
func writeRenamed(out *strings.Builder, text, from, to string) bool {
	nameByte := func(c byte) bool {
		return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for {
		i := strings.Index(text, from)
		if i < 0 {
			out.WriteString(text)
			return true
		}
		j := i + len(from)
		if (i > 0 && nameByte(text[i-1])) || (j < len(text) && text[j] != '.' && nameByte(text[j])) {
			return false
		}
		out.WriteString(text[:i])
		out.WriteString(to)
		text = text[j:]
	}
}
