package reports

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// FieldAlias is the hint for a field name the report does not have that
// users reach for (PyTorch's and nvidia-smi's names, a throughput's
// usual spellings): the fields that answer it, or "" for another name.
// starlark-go's own "did you mean" picks by spelling, which led from
// peak_memory and total_memory to host_memory.
func FieldAlias(name string) string {
	switch name {
	case "peak", "peak_memory", "peak_mem", "max_memory", "max_memory_allocated", "memory", "mem", "gpu_memory", "memory_used":
		return "r.peak_allocated is the step's max_memory_allocated, r.peak_reserved its max_memory_reserved, r.device_used what nvidia-smi shows"
	case "max_memory_reserved", "reserved", "memory_reserved":
		return "r.peak_reserved is the step's max_memory_reserved"
	case "total_memory", "memory_total", "gpu_total":
		return "r.capacity is the memory PyTorch sees (get_device_properties().total_memory), r.smi_total nvidia-smi's total"
	case "time", "step", "step_seconds", "seconds", "iteration_time", "step_time_s", "latency":
		return "r.step_time is the step's seconds, r.time_breakdown its seconds by cause"
	case "throughput", "tokens_per_second", "tps", "tokens_per_sec":
		return "r.tokens_per_s is the tokens per second over all data-parallel replicas, r.samples_per_s the samples"
	case "samples_per_second", "samples_per_sec":
		return "r.samples_per_s is the samples per second over all data-parallel replicas"
	}
	return ""
}

// aliasError is the error for a field name FieldAlias explains, nil for
// any other (the attribute is then unknown: starlark-go's message).
func aliasError(name string) error {
	h := FieldAlias(name)
	if h == "" {
		return nil
	}
	return &units.Error{Msg: fmt.Sprintf("report has no .%s field or method", name), Hint: h}
}
