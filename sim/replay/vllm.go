package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// VLLMOverheads is the memory a GRPO step's colocated vLLM engine holds
// through the step (core/grpo.go): vllm_gpu_memory_utilization of the GPU's
// total memory (vllm/v1/worker/gpu_worker.py init_device: requested_memory
// = MemorySnapshot().total_memory, torch.cuda.mem_get_info()'s total, x
// gpu_memory_utilization; determine_available_memory sizes the KV cache so
// that its weights, KV cache and profiled activations fill it). The engine
// allocates in the training process, through its caching allocator, so
// torch.cuda.max_memory_allocated() counts it too; memsh keeps it a row of
// its own, outside the step's allocations. None when the engine sleeps
// between generations (vllm_enable_sleep_mode: llm.sleep(level=2) discards
// its weights and KV cache, trl/generation/vllm_generation.py at TRL
// 1.16.0), runs as a server or is not used.
func VLLMOverheads(p *core.Plan) []Overhead {
	pr := p.Preference
	if !pr.GRPO() || pr.GRPOConfig.VLLM != core.VLLMColocate || pr.GRPOConfig.Sleep {
		return nil
	}
	u := pr.GRPOConfig.VLLMMemory
	return []Overhead{{Name: "vllm", Bytes: int64(u * float64(p.Device.Memory)),
		text: fmt.Sprintf("the colocated vLLM engine of GRPO's generation: vllm_gpu_memory_utilization %g of the GPU's %s total memory (its weights, KV cache and profiled activations; "+
			"vllm/v1/worker/gpu_worker.py: requested_memory = total_memory x gpu_memory_utilization), allocated in the training process and held through the step (no sleep mode)",
			u, p.Device.Name)}}
}
