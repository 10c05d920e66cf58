package core

import (
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// StateTensors lists States' tensors (the replay reads them so) and
// Bytes sums them, for every optimizer kind, fused or not, over shapes
// that reach each rule (bitsandbytes' small tensors, Adafactor's factored
// moments), without an allocation: a list made per parameter and step was
// a fifth of BenchmarkEvaluateLlama70B3D's allocations. Hand counts:
// fused AdamW on 4,096 fp32 elements holds 2 x 16 KiB and a
// 4-byte step; bitsandbytes' 8-bit moments of 8,192 elements, 2 x 8 KiB
// and 32 fp32 absmax per moment.
func TestStateTensorsAsStates(t *testing.T) {
	kinds := 0
	for k := OptimizerKind(1); int(k) < len(optimizerSpecs); k++ {
		for _, impl := range []string{"", "fused"} {
			for _, shape := range [][]int64{{8192}, {100}, {64, 128}, {2, 3, 4}} {
				o := Optimizer{Kind: k, Momentum: 0.9, Impl: impl}
				n := Numel(shape)
				want := o.States(shape, n, units.FP32)
				st := o.StateTensors(shape, n, units.FP32)
				var sum int64
				for i, s := range st.List() {
					if i >= len(want) || s != want[i] {
						t.Fatalf("%s %q %v: StateTensors %v, States %v", k, impl, shape, st.List(), want)
					}
					sum += s.Bytes
				}
				if len(st.List()) != len(want) || st.Bytes() != sum {
					t.Fatalf("%s %q %v: StateTensors %v (%d bytes), States %v", k, impl, shape, st.List(), st.Bytes(), want)
				}
				if a := testing.AllocsPerRun(10, func() {
					st := o.StateTensors(shape, n, units.FP32)
					sum = st.Bytes()
				}); a != 0 {
					t.Errorf("%s %q %v: StateTensors and Bytes allocate %.0f times", k, impl, shape, a)
				}
			}
		}
		kinds++
	}
	if kinds < 9 {
		t.Fatalf("%d optimizer kinds", kinds)
	}
	for _, c := range []struct {
		o     Optimizer
		n     int64
		bytes int64
	}{
		{Optimizer{Kind: AdamW, Impl: "fused"}, 4096, 2*4*4096 + 4},
		{Optimizer{Kind: AdamW8bit}, 8192, 2*8192 + 2*4*32},
	} {
		st := c.o.StateTensors([]int64{c.n}, c.n, units.FP32)
		if st.Bytes() != c.bytes {
			t.Errorf("%s %d: %d bytes, want %d", c.o.Kind, c.n, st.Bytes(), c.bytes)
		}
	}
}
