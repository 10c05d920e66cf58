package hw

import "testing"

// TestContextBytes: a card with a measured eager context (V100,
// calibration.md B1 row 0: 1,343 MiB) takes it under eager loading and
// its lazy figure (363 MiB, context_oom_test.go) under lazy loading; a
// card without one (the H100's 500 MiB on the older stacks) gains what
// eager loading adds, 666,632,192 - 287,047,680 = 379,584,512 B
// (pytorch/pytorch#86509). With the current stack (torch 2.11, CUDA 13.0)
// eager loading takes the card's CurrentEagerContext where it has one
// (the H200's, run 5 of sim/testdata/cuda_h200, and the GH100 cards' from
// it: TestGH100CurrentContext), else the same as the older stacks (A100).
func TestContextBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name        string
		eager       bool
		want        int64
		wantCurrent int64 // eager only; 0: want
	}{
		{"V100-16GB", true, 1343 * mib, 0},
		{"V100-16GB", false, 363 * mib, 0},
		{"V100-32GB", false, 363 * mib, 0},
		{"H100-80GB", false, 500 * mib, 0},
		{"H100-80GB", true, 500*mib + 379_584_512, 1_884_094_464},
		{"A100-80GB", true, 500*mib + 379_584_512, 0},
		{"H200", false, 500 * mib, 0},
		{"H200", true, 500*mib + 379_584_512, 1_884_094_464},
	} {
		d, err := LookupDevice(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.ContextBytes(c.eager, false); got != c.want {
			t.Errorf("%s eager=%v: context %d, want %d", c.name, c.eager, got, c.want)
		}
		wantCurrent := c.want
		if c.wantCurrent != 0 {
			wantCurrent = c.wantCurrent
		}
		if got := d.ContextBytes(c.eager, true); c.eager && got != wantCurrent {
			t.Errorf("%s eager, current stack: context %d, want %d", c.name, got, wantCurrent)
		}
	}
}

// TestContextFigureBasis: the figure ContextFigure names is the one it
// took (the report's source text is written from it, replay/device.go).
func TestContextFigureBasis(t *testing.T) {
	for _, c := range []struct {
		name           string
		eager, current bool
		want           ContextBasis
	}{
		{"V100-16GB", true, false, ContextMeasuredEager},
		{"V100-16GB", false, false, ContextLazy},
		{"H100-80GB", true, false, ContextAddedEager},
		{"H100-80GB", true, true, ContextCurrentEager},
		{"A100-80GB", true, true, ContextAddedEager}, // no current eager figure
		{"A100-80GB", false, true, ContextLazy},
		{"H200", true, true, ContextCurrentEager},
		{"H200", false, true, ContextCurrentLazy},
		{"H200", false, false, ContextLazy},
	} {
		d, err := LookupDevice(c.name)
		if err != nil {
			t.Fatal(err)
		}
		b, basis := d.ContextFigure(c.eager, c.current)
		if basis != c.want {
			t.Errorf("%s eager=%v current=%v: basis %d, want %d", c.name, c.eager, c.current, basis, c.want)
		}
		// the bytes are the catalog figure the basis names (ContextBytes
		// returns ContextFigure's, so comparing with it would hold anyway)
		named := map[ContextBasis]int64{
			ContextLazy:          d.Context,
			ContextCurrentLazy:   d.CurrentContext,
			ContextCurrentEager:  d.CurrentEagerContext,
			ContextMeasuredEager: d.EagerContext,
			ContextAddedEager:    d.Context + EagerModuleBytes,
		}[basis]
		if b != named || b <= 0 {
			t.Errorf("%s eager=%v current=%v: ContextFigure %d B, the figure its basis %d names %d B", c.name, c.eager, c.current, b, basis, named)
		}
	}
}
