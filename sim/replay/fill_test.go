package replay

import "testing"

// TestFill checks fill's doubling copies against its definition: every
// element set, at lengths around the powers of two.
func TestFill(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000} {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(i + 7)
		}
		if got := fill(s, none); len(got) != n {
			t.Fatalf("n=%d: len %d", n, len(got))
		}
		for i, v := range s {
			if v != none {
				t.Fatalf("n=%d: s[%d] = %d, want %d", n, i, v, none)
			}
		}
	}
}
