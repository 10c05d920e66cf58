package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestMegatronBatch: what Megatron-LM's get_batch loads onto a stage with
// each micro-batch (core/megatron_batch.go): position_ids [batch, seq]
// int64 on the first stage, loss_mask [batch, seq] fp32 on the last,
// and unless dataloader_mask=False the dataset's causal attention_mask
// [batch, 1, seq, seq] bool on both (a context-parallel rank's seq / cp
// query rows); a middle stage loads none. The mask and the positions
// are dropped when the forward step returns, the loss mask kept for
// loss_func's backward; only precision "megatron" loads them.
func TestMegatronBatch(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	type loaded map[string][]int64 // value name -> shape
	lower := func(p *core.Plan) loaded {
		t.Helper()
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		got := loaded{}
		for _, op := range prog.Ops {
			if strings.HasSuffix(op.Name, "megatron_batch") && op.Kind == "batch" {
				for _, v := range op.Out {
					name := prog.Values[v].Name
					got[name[strings.LastIndexByte(name, '.')+1:]] = prog.Values[v].Shape // past the stage's scopes
				}
			}
		}
		return got
	}
	plan := func(prec, mask string, par core.Parallelism) *core.Plan {
		p := testmodels.LlamaPlan(llama, 2, 64, prec, "none", "H100-80GB")
		p.DataloaderMask, p.Parallel = mask, par
		return p
	}
	all := loaded{"position_ids": {2, 64}, "attention_mask": {2, 1, 64, 64}, "loss_mask": {2, 64}}
	for _, tc := range []struct {
		name string
		p    *core.Plan
		want loaded
	}{
		{"megatron, its default", plan("megatron", "", core.Parallelism{}), all},
		{"megatron, mask on", plan("megatron", core.DataloaderMaskOn, core.Parallelism{}), all},
		{"megatron, --no-create-attention-mask-in-dataloader", plan("megatron", core.DataloaderMaskOff, core.Parallelism{}), loaded{"position_ids": {2, 64}, "loss_mask": {2, 64}}},
		{"megatron, cp 2: its query rows", plan("megatron", "", core.Parallelism{CP: 2}), loaded{"position_ids": {2, 32}, "attention_mask": {2, 1, 32, 64}, "loss_mask": {2, 32}}},
		{"bf16: none", plan("bf16", "", core.Parallelism{}), loaded{}},
	} {
		if got := lower(tc.p); !equalLoaded(got, tc.want) {
			t.Errorf("%s: loaded %v, want %v", tc.name, got, tc.want)
		}
	}
	p := plan("megatron", "", core.Parallelism{PP: 3, MicroBatches: 3})
	split, err := core.SplitStages(llama, p.Parallel.Norm())
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range []loaded{
		{"position_ids": {2, 64}, "attention_mask": {2, 1, 64, 64}},
		{},
		{"attention_mask": {2, 1, 64, 64}, "loss_mask": {2, 64}},
	} {
		p.PipeStage = &core.StageSpec{Stage: int64(s), Chunks: []int64{int64(s)}, Split: split}
		if got := lower(p); !equalLoaded(got, want) {
			t.Errorf("pp 3, stage %d: loaded %v, want %v", s, got, want)
		}
	}
	// The mask and the positions live through the forward, the loss
	// included, and are dropped before the backward; the loss mask is
	// saved for it.
	prog, err := plan("megatron", "", core.Parallelism{}).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	loss, dropped, saved := -1, -1, false
	for i, op := range prog.Ops {
		switch {
		case op.Kind == "cross_entropy":
			loss = i
		case op.Kind == "release" && op.Name == "megatron_batch":
			dropped = i
			if len(op.In) != 2 || prog.Values[op.In[0]].Name != "position_ids" || prog.Values[op.In[1]].Name != "attention_mask" {
				t.Errorf("dropped %v, want position_ids and attention_mask", op.In)
			}
		case op.Name == "loss_func":
			for _, v := range op.Saved {
				saved = saved || prog.Values[v].Name == "loss_mask"
			}
		}
	}
	if loss < 0 || dropped < loss { // the program lists the forward; the backward follows it
		t.Errorf("the loss is op %d, the batch dropped at op %d: want it dropped after the loss, in the forward", loss, dropped)
	}
	if !saved {
		t.Error("loss_func does not keep the loss mask for its backward")
	}
	for _, tc := range []struct {
		p    *core.Plan
		want string
	}{
		{plan("bf16", core.DataloaderMaskOn, core.Parallelism{}), `applies under precision="megatron"`},
		{func() *core.Plan {
			p := plan("megatron", core.DataloaderMaskOn, core.Parallelism{})
			p.TokensPerBatch = 128
			return p
		}(), "packed rows"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error saying %q", err, tc.want)
		}
	}
}

func equalLoaded(a, b map[string][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	return true
}
