package host

import "testing"

func TestCount(t *testing.T) {
	for _, row := range []struct {
		n    int64
		want string
	}{{0, "0 plans"}, {1, "1 plan"}, {2, "2 plans"}, {-1, "-1 plans"}} {
		if got := Count(row.n, "plan", "plans"); got != row.want {
			t.Errorf("Count(%d) = %q, want %q", row.n, got, row.want)
		}
	}
}
