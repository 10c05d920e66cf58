package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Paged optimizers (bitsandbytes paged_adamw, paged_adamw8bit) keep their
// state in CUDA unified memory (functional.get_paged: cudaMallocManaged):
// it sits on the device while there is room and the driver pages it to
// host memory when device allocations need the space, instead of failing
// with an out-of-memory error (QLoRA paper, section 2 "Paged Optimizers").
// The caching allocator does not see it, so it is outside
// torch.cuda.max_memory_allocated; nvidia-smi shows the part on the device.
//
// Model: the state takes what the step's peak leaves free on the device;
// the rest is paged out, reported as host memory, and paged in and out
// for the update (PCIe: twice the paged-out bytes per step).

// finishFinetune runs after the report is filled: paged state under
// pressure, offload host memory and the host RAM check.
func (r *Replay) finishFinetune(rep *Report, nonTorch int64) error {
	if paged := rep.States.pagedBytes(r.Plan); paged > 0 {
		free := rep.Capacity - rep.PeakReserved - nonTorch
		onDevice := min(paged, max(free, 0))
		if out := paged - onDevice; out > 0 && rep.OOM == nil {
			rep.DeviceUsed = rep.PeakReserved + nonTorch + onDevice
			rep.Headroom = rep.Capacity - rep.DeviceUsed
			rep.Fits = rep.Headroom >= 0
			rep.HostBreakdown = append(rep.HostBreakdown, Share{Name: "paged optimizer state (unified memory)", Bytes: out})
			rep.HostMemory += out
			rep.Traffic.PCIe += 2 * out
			rep.Notes = append(rep.Notes, fmt.Sprintf("paged optimizer: %s of %s optimizer state paged out to host memory under pressure (CUDA unified memory); the update pages it in and out each step",
				units.FormatBytes(out), units.FormatBytes(paged)))
		}
	}
	return r.finishOffload(rep)
}
