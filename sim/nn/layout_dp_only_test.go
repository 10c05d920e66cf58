package nn

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestDataParallelOnly: the vision towers modelled whole on each replica
// take any data parallelism and refuse tp, pp or cp above 1, naming the
// degrees given.
func TestDataParallelOnly(t *testing.T) {
	towers := map[string]core.LayoutChecker{"Gemma 3": &Gemma3Vision{}, "InternVL": &InternVLVision{}, "Llama 4": &Llama4Vision{}}
	for name, l := range towers {
		for _, row := range []struct {
			par  core.Parallelism
			want string
		}{
			{core.Parallelism{}, ""},
			{core.Parallelism{DP: 8, Zero: 3}, ""},
			{core.Parallelism{TP: 2}, "tp, pp and cp must be 1 (got tp=2, pp=1, cp=1)"},
			{core.Parallelism{PP: 2, CP: 4}, "tp, pp and cp must be 1 (got tp=1, pp=2, cp=4)"},
		} {
			err := l.CheckLayout("model.vision_tower", row.par)
			if row.want == "" && err != nil || row.want != "" && (err == nil || !strings.Contains(err.Error(), row.want)) {
				t.Errorf("%s at %+v: %v, want %q", name, row.par, err, row.want)
			}
		}
	}
	if err := checkMllamaLayout("model.vision_model", core.Parallelism{CP: 2}); err == nil || !strings.Contains(err.Error(), "(got tp=1, pp=1, cp=2)") {
		t.Errorf("Llama 3.2 Vision: %v", err)
	}
}
