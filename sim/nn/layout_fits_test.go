package nn

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// layoutFitterKinds are the layer kinds of sim/nn whose FitsLayout
// TestLayoutFitsAsChecked holds to CheckLayout: each receiver type of a
// FitsLayout method in the package must have a row (the test reads the
// package's source for them), with a variant for each of its refusals.
func layoutFitterKinds() map[string][]core.LayoutFitter {
	var attention []core.LayoutFitter
	for _, heads := range []int64{1, 6, 8, 12, 64, 128} {
		for _, kv := range []int64{0, 1, 2, 8} {
			base := Attention{Dim: 128 * heads, Heads: heads, KVHeads: kv}
			variants := []func(a *Attention){
				func(a *Attention) {},
				func(a *Attention) { a.InWidth = 2 * a.Dim },                           // Zamba2's shared attention
				func(a *Attention) { a.AdapterRank = 128 },                             // Zamba2's per-block adapters
				func(a *Attention) { a.SubNorm = true },                                // BitNet
				func(a *Attention) { a.QKNormWide = true },                             // OLMo 2
				func(a *Attention) { a.Differential = true },                           // DiffLlama
				func(a *Attention) { a.M3Indexer = &M3Indexer{Heads: 4, HeadDim: 64} }, // MiniMax M3
			}
			for _, v := range variants {
				a := base
				v(&a)
				attention = append(attention, &a)
			}
		}
	}
	return map[string][]core.LayoutFitter{"Attention": attention}
}

// TestLayoutFitsAsChecked: FitsLayout(par) == (CheckLayout("", par) ==
// nil) for every core.LayoutFitter of sim/nn, over layer kinds and
// layouts (tp, cp and every cp mode, divisible and not); the grid reaches
// every refusal of the attention's layout rule (attnRefusal).
func TestLayoutFitsAsChecked(t *testing.T) {
	kinds := layoutFitterKinds()
	for _, name := range fitterTypes(t) {
		if len(kinds[name]) == 0 {
			t.Errorf("%s has a FitsLayout method and no row in layoutFitterKinds", name)
		}
	}
	reached := map[attnRefusal]int{}
	for name, layers := range kinds {
		for _, l := range layers {
			for _, tp := range []int64{0, 1, 2, 3, 4, 8, 16} {
				for _, cp := range []int64{0, 1, 2, 3, 4, 8, 16} {
					for _, mode := range []string{"", "ring", "ulysses", "allgather"} {
						par := core.Parallelism{TP: tp, CP: cp, CPMode: mode}
						err := l.CheckLayout("", par)
						if fits := l.FitsLayout(par); fits != (err == nil) {
							t.Errorf("%s %+v at %+v: FitsLayout %v, CheckLayout %v", name, l, par, fits, err)
						}
						if err != nil && l.CheckLayout("layers.0.attn", par) == nil {
							t.Errorf("%s %+v at %+v: CheckLayout's refusal depends on the path", name, l, par)
						}
						if a, ok := l.(*Attention); ok {
							reached[a.layoutRefusal(par)]++
						}
					}
				}
			}
		}
	}
	for r := attnFits; r <= attnUlysses; r++ {
		if reached[r] == 0 {
			t.Errorf("no layout in the grid meets attention refusal %d (%v)", r, reached)
		}
	}
}

// fitterTypes lists the receiver types of the package's FitsLayout
// methods, read from its source.
func fitterTypes(t *testing.T) []string {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "FitsLayout" {
				continue
			}
			typ := fn.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no FitsLayout method found in sim/nn's source")
	}
	return names
}
