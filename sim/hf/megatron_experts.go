package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// ExpertsMegatron is Options.Experts for a model Megatron-Core trains:
// it builds its own modules from config.json (Megatron-SWIFT's
// mcore-bridge, Megatron-Bridge), the routed experts as TEGroupedMLP
// (--moe-grouped-gemm, ms-swift's default moe_grouped_gemm True,
// swift/megatron/arguments/megatron_args.py at v4.5.2), which is
// moe(impl="grouped") under precision="megatron" (nn/moe_megatron.go).
const ExpertsMegatron = "megatron"

// setMegatronExperts runs every MoE block of m as Megatron's grouped
// experts. The blocks are read as transformers 4.x builds them (an
// nn.Linear per expert in a loop, a router in the input's dtype): the
// shapes Megatron builds from the same config. transformers 5's own
// choices (3-D experts renamed gate_up_proj, fp32 top-k weights) are not
// Megatron's, so a release from 5.0 on is refused. The blocks of a model
// just built are its own: they are changed in place, every layer that
// shares one alike.
func setMegatronExperts(m *core.Model, version string) error {
	if version == "" {
		version = DefaultTransformers
	}
	v, err := parseTransformers(version)
	if err != nil {
		return err
	}
	if atLeast(v, expertsSince) {
		return &units.Error{Msg: fmt.Sprintf("experts=%q reads the MoE blocks as transformers 4.x builds them (got transformers=%q)", ExpertsMegatron, version),
			Hint: "Megatron-Core builds its own experts from config.json, not transformers 5's 3-D ones: pass transformers=\"4.57.1\""}
	}
	n := 0
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if x, ok := l.(*nn.MoE); ok {
			x.Impl = nn.MoEGrouped
			n++
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	for _, l := range m.Layers {
		walk(l)
	}
	if n == 0 {
		return &units.Error{Msg: fmt.Sprintf("experts=%q: the model has no MoE block memsh runs as Megatron's grouped experts", ExpertsMegatron),
			Hint: "leave experts out for a dense model"}
	}
	return nil
}

// HasMoE reports whether m has an MoE block (nn.MoE) anywhere.
func HasMoE(m *core.Model) bool {
	for _, l := range m.Layers {
		if hasMoE(l) {
			return true
		}
	}
	return false
}
