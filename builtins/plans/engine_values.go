package plans

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"go.starlark.net/starlark"
)

// EngineValue is the Starlark value train() takes for an engine value:
// what the advice engine (sim/advise) proposes for a keyword. Ints, bools
// and strings, a checkpoint policy, an optimizer, a layout, a cluster, an
// offload, a GPU, a LoRA configuration or a GRPO objective.
func EngineValue(v any) (starlark.Value, error) {
	switch x := v.(type) {
	case int64:
		return starlark.MakeInt64(x), nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case core.Checkpoint:
		return Checkpoint{x}, nil
	case core.Optimizer:
		return Optimizer{x}, nil
	case core.Parallelism:
		return Parallel{P: x}, nil
	case hw.Cluster:
		return Cluster{C: x}, nil
	case core.Offload:
		return Offload{&x}, nil
	case hw.Device:
		return NewGPU(x), nil
	case core.LoRA:
		return LoRA{&x}, nil
	case core.Preference: // a GRPO objective's (advise's vllm_sleep): its reference resolved by train() again
		if x.GRPO() {
			x.Reference = ""
		}
		return Preference{x}, nil
	case core.Compile:
		switch {
		case x.Blocks && x.Loss:
			return starlark.True, nil
		case x.Blocks:
			return starlark.String("blocks"), nil
		case x.Loss:
			return starlark.String("loss"), nil
		}
		return starlark.False, nil
	}
	return nil, fmt.Errorf("internal error: no train() value for %T", v)
}

// KeywordText is keyword name set to v as a user writes it in train() or
// replace(): checkpoint="full", optimizer=adamw8bit(), gpu="H200".
func KeywordText(name string, v starlark.Value) string {
	return name + "=" + argRepr(v)
}
