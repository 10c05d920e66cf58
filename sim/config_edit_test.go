package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// configEdit is a tiny config.json edited (from replaced by to, once)
// and the parameters transformers builds from the edited file (want).
type configEdit struct {
	name, from, to string
	want           int64
}

// checkEditedParams builds each edit of tiny under sdpa and checks its
// parameter count.
func checkEditedParams(t *testing.T, tiny string, edits []configEdit) {
	t.Helper()
	for _, tc := range edits {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.want)
		}
	}
}

// configRefusal is a tiny config.json edited (from replaced by to, once)
// into one hf_config refuses with an error naming key.
type configRefusal struct{ name, from, to, key string }

// checkEditedRefused checks that each edit of tiny is refused, naming its
// key.
func checkEditedRefused(t *testing.T, tiny string, edits []configRefusal) {
	t.Helper()
	for _, tc := range edits {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.key)
		}
	}
}
