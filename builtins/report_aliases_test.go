package builtins

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestReportFieldAliases checks that a report field as PyTorch, nvidia-smi
// or a throughput table names it gets the fields that answer it, that
// every field a hint names exists, and that hasattr and getattr's
// default still see no such field.
func TestReportFieldAliases(t *testing.T) {
	eval := starEval(t, `r = simulate(train(model("m", embedding(1000, 64), linear(64, 1000, name = "lm_head")), seq = 128))`)
	for _, tc := range []struct{ name, hint string }{
		{"peak", "r.peak_allocated"},
		{"peak_memory", "r.peak_allocated"},
		{"max_memory_allocated", "r.peak_allocated"},
		{"max_memory_reserved", "r.peak_reserved"},
		{"total_memory", "r.capacity"},
		{"time", "r.step_time"},
		{"throughput", "r.tokens_per_s"},
		{"samples_per_second", "r.samples_per_s"},
	} {
		_, err := eval("r." + tc.name)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Hint, tc.hint) || ue.Msg != "report has no ."+tc.name+" field or method" {
			t.Errorf("r.%s: got %v, want no such field with a hint naming %s", tc.name, err, tc.hint)
			continue
		}
		for _, w := range strings.Fields(ue.Hint) {
			if f, ok := strings.CutPrefix(w, "r."); ok {
				f = strings.TrimRight(f, ",;")
				if _, err := eval("r." + f); err != nil {
					t.Errorf("r.%s's hint names r.%s: %v", tc.name, f, err)
				}
			}
		}
	}
	if v, err := eval(`(hasattr(r, "peak"), getattr(r, "peak", 7))`); err != nil || v.String() != "(False, 7)" {
		t.Errorf("hasattr and getattr of an alias: %v, %v", v, err)
	}
	if _, err := eval("r.no_such_field"); err == nil || strings.Contains(err.Error(), "hint") {
		t.Errorf("r.no_such_field: %v", err)
	}
}
