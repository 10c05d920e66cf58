package builtins

import (
	"fmt"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// builtinTables lists every file's table of builtins. Adding a file of builtins
// means adding one line here.
func builtinTables() [][]host.Builtin {
	return [][]host.Builtin{
		host.UnitBuiltins(),
		host.FormatBuiltins(), // format
		host.DtypeBuiltins(),
		plans.GpuBuiltins(),
		host.ModuleBuiltins(),
		models.LayerBuiltins(),
		models.ModelBuiltins(),
		plans.PrecisionBuiltins(),
		plans.OptimizerBuiltins(),
		plans.CheckpointBuiltins(),
		plans.LoraBuiltins(),
		plans.ParallelBuiltins(), // cluster; parallel() layouts are in layers_extra.go's entry
		outputBuiltins(),         // emit, expect
		plans.PlanBuiltins(),
		plans.FinetuneBuiltins(),   // offload, litgpt
		plans.PreferenceBuiltins(), // dpo
		reports.ReportBuiltins(),
		models.TableBuiltins(),
		reports.TableStepsBuiltins(),
		models.HfConfigBuiltins(),
		models.ExtraLayerBuiltins(),
		models.GraphBuiltins(),
		models.GraphProcessorBuiltins(), // graph_transformer_processor
		tables.SweepBuiltins(),          // sweep; the table value is resulttable.go
		tables.SearchBuiltins(),         // search
		tables.TabulateBuiltins(),       // tabulate; the methods of every table
		tables.AdviseBuiltins(),         // advise
		tables.LimitBuiltins(),          // max_batch, max_seq
	}
}

// All returns every registered builtin, sorted by name.
func All() []host.Builtin {
	var all []host.Builtin
	for _, t := range builtinTables() {
		all = append(all, t...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// Lookup returns the builtin with the given (possibly dotted) name.
func Lookup(name string) (host.Builtin, bool) {
	for _, t := range builtinTables() {
		for _, b := range t {
			if b.Name == name {
				return b, true
			}
		}
	}
	return host.Builtin{}, false
}

// Predeclared returns a fresh, frozen dict of all memsh builtins, constants
// and modules. Dotted names are gathered into starlarkstruct modules. It
// panics on a malformed registry (duplicate names, an entry with both or
// neither of Fn and Value), which registry_test.go rules out.
func Predeclared() starlark.StringDict {
	d := starlark.StringDict{}
	modules := map[string]starlark.StringDict{}
	docOnly := map[string]bool{}
	for _, b := range All() {
		var v starlark.Value
		switch {
		case b.Fn != nil && b.Value != nil:
			panic(fmt.Sprintf("builtins: %s has both Fn and Value", b.Name))
		case b.Fn != nil:
			v = starlark.NewBuiltin(b.Name, guard(b.Name, b.Fn))
		case b.Value != nil:
			v = b.Value
		default:
			docOnly[b.Name] = true
			continue
		}
		if mod, member, ok := strings.Cut(b.Name, "."); ok {
			if modules[mod] == nil {
				modules[mod] = starlark.StringDict{}
			}
			if _, dup := modules[mod][member]; dup {
				panic(fmt.Sprintf("builtins: duplicate name %s", b.Name))
			}
			modules[mod][member] = v
			continue
		}
		if _, dup := d[b.Name]; dup {
			panic(fmt.Sprintf("builtins: duplicate name %s", b.Name))
		}
		d[b.Name] = v
	}
	for name, members := range modules {
		if _, dup := d[name]; dup {
			panic(fmt.Sprintf("builtins: module %s clashes with a builtin of that name", name))
		}
		d[name] = &starlarkstruct.Module{Name: name, Members: members}
		delete(docOnly, name)
	}
	for name := range docOnly {
		panic(fmt.Sprintf("builtins: %s has neither Fn nor Value nor module members", name))
	}
	d.Freeze()
	return d
}

// guard wraps fn so that a Go panic becomes an ordinary Starlark error.
func guard(name string, fn host.BuiltinFunc) host.BuiltinFunc {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (v starlark.Value, err error) {
		defer func() {
			if r := recover(); r != nil {
				v, err = nil, fmt.Errorf("internal error in %s: %v", name, r)
			}
		}()
		return fn(thread, b, args, kwargs)
	}
}
