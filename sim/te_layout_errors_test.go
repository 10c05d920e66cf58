package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's shape refusals are the layout's (core.LayoutError:
// a rank's rows follow the micro-batch and cp, its shard the tp), so
// search() rejects such a layout by reason rather than failing: rows not
// divisible by 8 (2 x 63 = 126, assert_dim_for_fp8_exec) and MXFP8's
// blocks of 32 (an FFN of 720). Each lowers once the shape is fixed.
func TestTEShapeRefusalsAreLayoutErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		plan, fix func() *core.Plan
		want      string
	}{
		{"126 rows", func() *core.Plan {
			p := tePlan("te-tensorwise", "H100-80GB")
			p.Seq = 63
			return p
		}, func() *core.Plan { return tePlan("te-tensorwise", "H100-80GB") }, "needs rows divisible by 8"},
		{"MXFP8 FFN 720", func() *core.Plan {
			p := testmodels.LlamaPlan(testmodels.Llama(256, 1, 8, 2, 720, 64, "sdpa"), 2, 64, "megatron", "none", "B200")
			p.Float8 = core.Float8{Scaling: "te-mxfp8"}
			return p
		}, func() *core.Plan { return tePlan("te-mxfp8", "B200") }, "quantizes blocks of 32"},
	} {
		_, err := c.plan().LowerProgram()
		var le *core.LayoutError
		var se *units.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &le) || !errors.As(err, &se) || se.Hint == "" {
			t.Errorf("%s: %v, want a core.LayoutError saying %q with a hint", c.name, err, c.want)
		}
		if _, err := c.fix().LowerProgram(); err != nil {
			t.Errorf("%s, fixed: %v", c.name, err)
		}
	}
}
