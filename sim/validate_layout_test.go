package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// layoutErrWithPaths is the layers' layout check as it stood before the
// path-free first pass (core.Model.validateParallel): every layer walked
// with its path, the first layer error, else the first vocabulary error,
// else the output layer's and the experts' checks.
func layoutErrWithPaths(m *core.Model, par core.Parallelism) error {
	tp, ep := par.TP, par.EP
	var err, vocabErr error
	moe := false
	check := func(path string, l core.Layer) {
		if err != nil {
			return
		}
		if _, ok := l.(core.ExpertLayer); ok {
			moe = true
		}
		if c, ok := l.(core.LayoutChecker); ok {
			err = c.CheckLayout(path, par)
		}
		if e, ok := l.(core.TokenLookup); ok && vocabErr == nil {
			if rows, _ := e.LookupShape(); rows%tp != 0 {
				vocabErr = &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the %d embedding rows (vocabulary)", tp, rows),
					Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", core.PadVocab(rows, tp))}
			}
		}
	}
	for _, l := range m.Layers {
		core.Walk(l, core.ChildPath("", nil, l), check)
	}
	switch {
	case err != nil:
		return err
	case vocabErr != nil:
		return vocabErr
	case m.Vocab > 0 && m.Vocab%tp != 0:
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("tp=%d does not divide vocab %d (the output layer)", tp, m.Vocab),
			Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", core.PadVocab(m.Vocab, tp))}
	case ep > 1 && !moe:
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("ep=%d but the model has no moe() layer", ep)}
	}
	return nil
}

// TestValidateLayoutPathFree: the layout check that runs without paths
// first gives every plan the error (or none) that walking with paths
// gives, over every model of testdata/hf and a Llama, for tensor,
// expert and context (ring and Ulysses) degrees that divide and that do
// not.
func TestValidateLayoutPathFree(t *testing.T) {
	models := []*core.Model{testmodels.Llama(256, 4, 8, 4, 704, 1000, "flash")}
	for _, c := range hfConfigModels(t) {
		models = append(models, c.m)
	}
	layouts := []core.Parallelism{{TP: 2}, {TP: 3}, {TP: 4}, {TP: 8}, {TP: 16}, {TP: 64}, {TP: 7},
		{DP: 2, EP: 2}, {DP: 8, EP: 8}, {DP: 3, EP: 3}, {TP: 2, DP: 4, EP: 4}, {CP: 2}, {CP: 4, CPMode: "ulysses"},
		{TP: 2, CP: 8, CPMode: "ulysses"}, {CP: 3, CPMode: "ulysses"}}
	failed, passed := 0, 0
	for _, m := range models {
		for _, par := range layouts {
			p := testmodels.LlamaPlan(m, 1, 5040, "bf16-mixed", "none", "H100-80GB") // 5040 tokens: cp and tp up to 16 divide them but 9
			p.Parallel = par
			n := par.Norm()
			p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: n.DP * n.TP * n.PP * n.CP}
			want := layoutErrWithPaths(m, n)
			got := p.Validate()
			// (Without a layer error, Validate may still refuse the plan
			// for another reason; a wrongly refused first pass falls back
			// to the walk with paths, which finds nothing.)
			if want != nil && (got == nil || got.Error() != want.Error()) {
				t.Errorf("%s %s: Validate gives %v, the walk with paths %v", m.Name, par, got, want)
			}
			if want != nil {
				failed++
			} else if got == nil {
				passed++
			}
		}
	}
	t.Logf("%d models x %d layouts: %d refused by a layer check, %d valid", len(models), len(layouts), failed, passed)
	if failed < 50 || passed < 50 {
		t.Errorf("the matrix lost its cases: %d refused, %d valid", failed, passed)
	}
}

// TestValidateForCheckedModel: ValidateFor skips the model's own checks
// only for the model it is told was checked; every other check stays.
func TestValidateForCheckedModel(t *testing.T) {
	m := testmodels.Llama(256, 4, 8, 4, 704, 1000, "flash")
	bad := *m
	bad.Loss = "hinge" // Model.Validate refuses it
	p := testmodels.LlamaPlan(&bad, 1, 64, "bf16-mixed", "none", "H100-80GB")
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "unknown loss") {
		t.Fatalf("Validate: %v, want the model's unknown loss", err)
	}
	if err := p.ValidateFor(m); err == nil || !strings.Contains(err.Error(), "unknown loss") {
		t.Errorf("ValidateFor(another model): %v, want the model's unknown loss", err)
	}
	if err := p.ValidateFor(&bad); err != nil {
		t.Errorf("ValidateFor(the plan's model): %v, want its checks skipped", err)
	}
	p.Parallel = core.Parallelism{TP: 3}
	p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 3}
	if err := p.ValidateFor(&bad); err == nil || !strings.Contains(err.Error(), "does not divide") {
		t.Errorf("ValidateFor(the plan's model) with tp=3: %v, want the layout's error", err)
	}
}
