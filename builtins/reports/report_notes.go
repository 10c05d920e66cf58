package reports

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/timing"
	"go.starlark.net/starlark"
)

// notes are the report's remarks: the engine's, the time model's (what
// it leaves out of the step, a pipeline's bubble), then the assumptions
// a custom gpu() brought in where they shaped the result.
func (x *Report) notes() []string {
	p := x.plan.P
	gpus := p.Parallel.GPUs()
	out := append(append([]string(nil), x.r.Notes...), x.r.Time.Notes...)
	out = append(out, deviceNotes(p.Device, gpus, x.r.Traffic.PCIe)...)
	if _, err := hw.LookupDevice(p.Device.Name); err != nil && p.Cluster.InterGBps == 0 && p.Cluster.Norm(gpus).Nodes > 1 {
		out = append(out, fmt.Sprintf("%s is not a catalog card: the network between nodes is the time model's default for "+
			"an unknown card, %g GB/s per GPU and direction; pass cluster(inter=...) for yours", p.Device.Name, timing.InterNodeGBps(p.Device)))
	}
	return out
}

// deviceNotes say which documented defaults of a custom gpu() stood in
// for figures not given: link_gbps=0 (no NVLink) matters between GPUs,
// where NCCL then talks over PCIe (its buffers and the collectives' time
// follow), pcie_gbps=32 there and for host transfers.
func deviceNotes(d hw.Device, gpus int64, pcieBytes int64) []string {
	var out []string
	if d.LinkAssumed && gpus > 1 {
		link := "link_gbps was not given to gpu(): the default, 0 (no NVLink), has the " + fmt.Sprint(gpus) +
			" GPUs talk over PCIe peer-to-peer"
		if d.PCIeAssumed {
			link += fmt.Sprintf(" at the default pcie_gbps=%g (PCIe Gen4 x16)", d.PCIeGBps)
		}
		out = append(out, fmt.Sprintf("%s: %s, which sets NCCL's buffers and the collectives' time; pass link_gbps= (NVLink per direction, GB/s) if %s has NVLink",
			d.Name, link, d.Name))
	} else if d.PCIeAssumed && pcieBytes > 0 {
		out = append(out, fmt.Sprintf("%s: pcie_gbps was not given to gpu(): host transfers assume the default, %g GB/s per direction (PCIe Gen4 x16)",
			d.Name, d.PCIeGBps))
	}
	return out
}

func notesField(x *Report) starlark.Value {
	notes := x.notes()
	out := make([]starlark.Value, len(notes))
	for i, n := range notes {
		out[i] = starlark.String(n)
	}
	return host.FrozenList(out)
}
