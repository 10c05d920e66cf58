package timing

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// A stage's module rows (summarise) are the rows StepTimeIn makes for the
// stage's own report, less the tail's terms, where the schedule passes
// w.M times: made afresh by moduleRows over the per-micro-batch time at
// passes(par, w), they are the same rows, on every schedule (DualPipe's
// passes are half of w.M: made afresh there).
func TestStageModulesAreTheReportsRows(t *testing.T) {
	llama := testmodels.Llama(256, 8, 8, 4, 704, 1000, "flash")
	for _, par := range []core.Parallelism{
		{PP: 2}, {PP: 4, TP: 2, SequenceParallel: true},
		{PP: 2, Schedule: "interleaved", VirtualStages: 2},
		{PP: 2, Schedule: "zb-h1"}, {PP: 2, Schedule: "zb-v", VirtualStages: 2},
		{PP: 2, Schedule: "dualpipe"},
	} {
		for _, ckpt := range []string{"none", "full"} {
			p := testmodels.LlamaPlan(llama, 2, 64, "megatron", ckpt, "H100-80GB")
			p.Parallel, p.GradAccum = par, 4
			norm := p.Parallel.Norm()
			split, err := core.SplitStages(p.Model, norm)
			if err != nil {
				t.Fatal(err)
			}
			m := p.MicroBatches()
			for s := range norm.PP {
				q := *p
				n := core.Inflight(norm, s, m)
				q.Parallel.MicroBatches, q.GradAccum = m, 1
				q.PipeStage = &core.StageSpec{Stage: s, Inflight: n, Chunks: core.StageChunks(norm, s, n), Split: split}
				prog, err := q.LowerProgram()
				if err != nil {
					t.Fatal(err)
				}
				r, err := replay.Run(prog, &q, core.Options{})
				if err != nil {
					t.Fatal(err)
				}
				te, st := StepTime(prog, &q, r)
				if st == nil {
					t.Fatalf("%s, %s, stage %d: no stage time: %v", norm, ckpt, s, te.Notes)
				}
				w, err := workOf(prog, &q, r, nil)
				if err != nil {
					t.Fatal(err)
				}
				gt := w.Times(&q)
				want := moduleRows(w, gpuTime{PerMB: gt.PerMB}, float64(passes(norm, w)))
				if len(want) == 0 {
					t.Fatalf("%s, %s, stage %d: no module rows", norm, ckpt, s)
				}
				if diff := cmp.Diff(want, st.modules); diff != "" {
					t.Errorf("%s, %s, stage %d: the stage's module rows differ from moduleRows' (-want +got):\n%s", norm, ckpt, s, diff)
				}
				if whole := moduleRows(w, gt, float64(w.M)); !cmp.Equal(whole, te.Modules) {
					t.Errorf("%s, %s, stage %d: the report's module rows differ from moduleRows'", norm, ckpt, s)
				}
			}
		}
	}
}
