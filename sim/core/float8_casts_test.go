package core

import (
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// The backward casts and copies of a tensor-parallel Float8Linear,
// counted by hand per element of the cast (c = 250) and of the copies
// (g + x + w = 9,000, each read and written: 18,000 B, three kernels).
// Eager from bf16 (h = 2): abs 2·2, max 2, the fp32 upcast 2 + 4, the
// scale multiply 8, the clamp 8, the fp8 copy 4 + 1: 33 B an element,
// six kernels. Eager from fp32 there is no upcast: 3·4 + 8 + 8 + 5 = 33
// B, five kernels. Compiled: an amax pass and a cast pass, 2·h + 1 B and
// two kernels (5 from bf16, 9 from fp32).
func TestFloat8TPBackwardCastsByHand(t *testing.T) {
	const g, c, x, w = 1000, 250, 3000, 5000
	for _, tc := range []struct {
		name     string
		hp       units.DType
		compiled bool
		bytes    float64
		kernels  int32
	}{
		{"eager bf16", units.BF16, false, 33*c + 18000, 6 + 3},
		{"eager fp32", units.FP32, false, 33*c + 18000, 5 + 3},
		{"compiled bf16", units.BF16, true, 5*c + 18000, 2 + 3},
		{"compiled fp32", units.FP32, true, 9*c + 18000, 2 + 3},
	} {
		bytes, kernels := float8TPBackwardCasts(g, c, x, w, tc.hp, tc.compiled)
		if bytes != tc.bytes || kernels != tc.kernels {
			t.Errorf("%s: %g B in %d kernels, want %g B in %d", tc.name, bytes, kernels, tc.bytes, tc.kernels)
		}
	}
}
