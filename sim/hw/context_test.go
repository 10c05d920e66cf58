package hw

import "testing"

// TestContextBytes: a card with a measured eager context (V100,
// calibration.md B1 row 0: 1,343 MiB) takes it under eager loading and
// its lazy figure (363 MiB, context_oom_test.go) under lazy loading; a
// card without one (H100's 500 MiB) gains what eager loading adds,
// 666,632,192 - 287,047,680 = 379,584,512 B (pytorch/pytorch#86509).
func TestContextBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		eager bool
		want  int64
	}{
		{"V100-16GB", true, 1343 * mib},
		{"V100-16GB", false, 363 * mib},
		{"V100-32GB", false, 363 * mib},
		{"H100-80GB", false, 500 * mib},
		{"H100-80GB", true, 500*mib + 379_584_512},
		{"H200", false, 500 * mib},
		{"H200", true, 500*mib + 379_584_512}, // eager: the current stack's lazy figure is not used
	} {
		d, err := LookupDevice(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.ContextBytes(c.eager, false); got != c.want {
			t.Errorf("%s eager=%v: context %d, want %d", c.name, c.eager, got, c.want)
		}
		if got := d.ContextBytes(c.eager, true); c.eager && got != c.want {
			t.Errorf("%s eager, current stack: context %d, want %d", c.name, got, c.want)
		}
	}
}
