package hw

import "testing"

// TestContextBytes: a catalog context measured with eager module loading
// (V100, calibration.md B1 row 0: 1,343 MiB) loses what eager loading
// adds, 666,632,192 - 287,047,680 = 379,584,512 B (pytorch/pytorch#86509),
// under lazy loading; a lazy one (H100's 500 MiB) gains it under eager.
func TestContextBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		eager bool
		want  int64
	}{
		{"V100-16GB", true, 1343 * mib},
		{"V100-16GB", false, 1343*mib - 379_584_512},
		{"H100-80GB", false, 500 * mib},
		{"H100-80GB", true, 500*mib + 379_584_512},
	} {
		d, err := LookupDevice(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.ContextBytes(c.eager); got != c.want {
			t.Errorf("%s eager=%v: context %d, want %d", c.name, c.eager, got, c.want)
		}
	}
}
