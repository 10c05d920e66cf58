package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// The getters and setters that parallel()'s layout keywords (layoutKeywords,
// parallel_keywords.go) share: each turns a keyword's Starlark value into
// its core.Parallelism field, None giving the default.

// optionalInt is the getter of a count that is None when unset.
func optionalInt(f func(p *core.Parallelism) *int64) func(p core.Parallelism) starlark.Value {
	return func(p core.Parallelism) starlark.Value {
		if n := *f(&p); n > 0 {
			return starlark.MakeInt64(n)
		}
		return starlark.None
	}
}

func setStageLayers(v starlark.Value, p *core.Parallelism) error {
	switch x := v.(type) {
	case nil, starlark.NoneType:
		return nil
	case starlark.String:
		p.StageSplit = string(x)
		return nil
	case starlark.Indexable:
		out := make([]int64, x.Len())
		for i := range out {
			n, err := host.AsInt64(x.Index(i), fmt.Sprintf("stage_layers[%d]", i))
			if err != nil {
				return err
			}
			out[i] = n
		}
		if len(out) == 0 {
			return fmt.Errorf("stage_layers must not be empty (None: the even split)")
		}
		p.StageLayers = out
		return nil
	}
	return fmt.Errorf("stage_layers must be a list of layer counts or \"torchtitan\" (got %s)", v.Type())
}

// degree is a keyword holding a parallel degree (1 by default).
func degree(name, doc string, f func(p *core.Parallelism) *int64) layoutKeyword {
	return layoutKeyword{Name: name, Sig: "1", Doc: doc,
		get: func(p core.Parallelism) starlark.Value { return starlark.MakeInt64(max(*f(&p), 1)) },
		set: setDegree(name, f)}
}

func setDegree(name string, f func(p *core.Parallelism) *int64) func(v starlark.Value, p *core.Parallelism) error {
	return func(v starlark.Value, p *core.Parallelism) error {
		n, err := models.OptInt(v, name, 0)
		if err != nil {
			return err
		}
		if v != nil && v != starlark.None && n < 1 {
			return fmt.Errorf("%s must be at least 1 (got %d)", name, n)
		}
		*f(p) = n
		return nil
	}
}

func setLayoutBool(name string, f func(p *core.Parallelism) *bool) func(v starlark.Value, p *core.Parallelism) error {
	return func(v starlark.Value, p *core.Parallelism) error {
		switch b := v.(type) {
		case nil, starlark.NoneType:
		case starlark.Bool:
			*f(p) = bool(b)
		default:
			return boolError(name, v, true)
		}
		return nil
	}
}

// setLayoutNotBool sets a field that holds the keyword's negation (the
// keyword defaults to True, the field to false).
func setLayoutNotBool(name string, f func(p *core.Parallelism) *bool) func(v starlark.Value, p *core.Parallelism) error {
	set := setLayoutBool(name, f)
	return func(v starlark.Value, p *core.Parallelism) error {
		if b, ok := v.(starlark.Bool); ok {
			v = !b
		}
		return set(v, p)
	}
}

func fsdpDType(name, doc string, f func(p *core.Parallelism) *units.DType) layoutKeyword {
	return layoutKeyword{Name: name, Sig: "None", Doc: doc,
		get: func(p core.Parallelism) starlark.Value {
			if d := *f(&p); d != units.InvalidDType {
				return host.NewDType(d)
			}
			return starlark.None
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			if v == nil || v == starlark.None {
				return nil
			}
			var d host.DType
			if err := d.Unpack(v); err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			*f(p) = d.SimDType()
			return nil
		}}
}

func setFSDP(v starlark.Value, p *core.Parallelism) error {
	switch f := v.(type) {
	case nil, starlark.NoneType:
	case starlark.Bool:
		p.FSDP = bool(f)
	case starlark.Int:
		n, ok := f.Int64()
		if !ok || (n != 1 && n != 2) {
			return fmt.Errorf("fsdp must be True, False, 1 (FullyShardedDataParallel) or 2 (fully_shard) (got %s)", f)
		}
		p.FSDP, p.FSDPVersion = true, int(n)
	default:
		return fmt.Errorf("fsdp must be True, False, 1 or 2 (got %s)", f.Type())
	}
	return nil
}

func setReshard(v starlark.Value, p *core.Parallelism) error {
	switch x := v.(type) {
	case nil, starlark.NoneType:
	case starlark.Bool:
		p.NoReshard = !bool(x)
	case starlark.Int:
		n, ok := x.Int64()
		if !ok || n < 2 {
			return fmt.Errorf("reshard_after_forward must be True, False or a group size of at least 2 (got %s)", x)
		}
		p.ReshardTo = n
	default:
		return fmt.Errorf("reshard_after_forward must be True, False or an int (got %s)", v.Type())
	}
	return nil
}

// zeroSize is one of DeepSpeed ZeRO's sizes as a layout keyword: a whole
// number of elements, "auto" (the Hugging Face Trainer's fill from the
// model's hidden size, core/zero_sizes.go), or None for DeepSpeed's
// default.
func zeroSize(name, doc string, f func(p *core.Parallelism) *core.ZeroSize) layoutKeyword {
	return layoutKeyword{Name: name, Sig: "None", Doc: doc,
		get: func(p core.Parallelism) starlark.Value {
			switch s := *f(&p); {
			case s.Auto:
				return starlark.String("auto")
			case s.Set:
				return starlark.MakeInt64(s.N)
			}
			return starlark.None
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch x := v.(type) {
			case nil, starlark.NoneType:
				*f(p) = core.ZeroSize{}
			case starlark.String:
				if x != "auto" {
					return fmt.Errorf("%s must be a number of elements or \"auto\" (got %s)", name, x)
				}
				*f(p) = core.ZeroSize{Auto: true}
			case starlark.Int:
				n, ok := x.Int64()
				if !ok || n < 0 {
					return fmt.Errorf("%s must be a number of elements, 0 or more (got %s)", name, x)
				}
				*f(p) = core.ZeroSize{N: n, Set: true}
			default:
				return fmt.Errorf("%s must be a number of elements or \"auto\" (got %s)", name, v.Type())
			}
			return nil
		}}
}
