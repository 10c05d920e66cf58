package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestLowersAlike checks what FuzzSizes's shared program rests on: plans
// that lowersAlike says lower alike do lower to the same program, field
// for field; replaying one's program for the other gives the report a
// fresh Evaluate gives; and a replay leaves the program it replays as it
// was lowered. The plans: every plan byte of FuzzSizes over a small
// repeat, each layer kind under a few plan bytes, and a small Llama
// under full and selective checkpointing.
func TestLowersAlike(t *testing.T) {
	type input struct {
		kind    uint8
		planOpt uint8
	}
	var inputs []input
	for opt := range 256 {
		inputs = append(inputs, input{5, uint8(opt)})
	}
	for kind := range uint8(8) {
		for _, opt := range []uint8{0x00, 0x05, 0x0a, 0x21, 0x40, 0x61, 0xe9} {
			inputs = append(inputs, input{kind, opt})
		}
	}
	var plans []*core.Plan
	for _, in := range inputs {
		l, _ := fuzzLayer(in.kind, 64, 3, 2, 2, 1)
		m := &core.Model{Name: "fuzz", Layers: []core.Layer{l}, Loss: "mse"}
		if in.kind%8 == 1 {
			m.Loss, m.Vocab = "cross_entropy", 64
		}
		plans = append(plans, fuzzPlan(m, 2, 16, in.planOpt))
	}
	llama := testmodels.Llama(256, 4, 4, 2, 512, 1000, "sdpa")
	for _, ckpt := range []string{"none", "full", "selective"} {
		plans = append(plans, testmodels.LlamaPlan(llama, 2, 128, "bf16-mixed", ckpt, "H100-80GB"))
	}
	shared := 0
	for i, p := range plans {
		q := *p
		q.ExpandableSegments = true
		q.Validation = !q.Parallel.Active() && q.Phase == core.Train
		if !lowersAlike(p, &q) {
			t.Fatalf("plan %d: lowersAlike says a plan with expandable segments and validation lowers unlike itself", i)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			continue // nothing to share
		}
		if again, err := q.LowerProgram(); err != nil || !reflect.DeepEqual(prog, again) {
			t.Fatalf("plan %d: expandable segments and validation change the lowering (err %v)", i, err)
		}
		want, wantErr := Evaluate(&q, core.Options{})
		got, _, replayed, err := evaluateLowered(&q, prog, core.Options{}, math.MaxInt64)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("plan %d: shared program: error %v, fresh lowering: %v", i, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plan %d: the report of the shared program differs from a fresh Evaluate's", i)
		}
		if replayed != nil && replayed != prog {
			t.Fatalf("plan %d: evaluateLowered replayed another program than the one given", i)
		}
		if fresh, _ := p.LowerProgram(); !reflect.DeepEqual(prog, fresh) {
			t.Fatalf("plan %d: a replay changed the program it replayed", i)
		}
		if replayed == prog {
			shared++
		}
	}
	if shared < len(plans)/2 {
		t.Fatalf("only %d of %d plans replayed a shared program: the check compared too little", shared, len(plans))
	}
	// And plans that lower differently are told apart.
	p := plans[0]
	for _, change := range []func(q *core.Plan){
		func(q *core.Plan) { q.Batch++ },
		func(q *core.Plan) { q.Offload = &core.Offload{Optimizer: "cpu"} },
		func(q *core.Plan) { q.Parallel.FSDP = true },
		func(q *core.Plan) { q.Phase = core.Eval },
	} {
		q := *p
		change(&q)
		if lowersAlike(p, &q) {
			t.Fatalf("lowersAlike says %+v lowers as %+v", q, *p)
		}
	}
}
