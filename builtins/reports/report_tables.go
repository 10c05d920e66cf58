package reports

import (
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/replay"
	"go.starlark.net/starlark"
)

// tableReports is r.tables: one struct (or, plain, dict) per table layer.
func tableReports(r *replay.Report, plain bool) starlark.Value {
	out := make([]starlark.Value, len(r.Tables))
	for i, t := range r.Tables {
		i64 := starlark.MakeInt64
		f := starlark.StringDict{
			"name": starlark.String(t.Name), "grad": starlark.String(t.Grad), "placement": starlark.String(t.Placement),
			"params": i64(t.Params), "rows_read": i64(t.RowsRead), "leaf_rows": i64(t.LeafRows),
			"padded":       starlark.Bool(t.Padded),
			"device_bytes": i64(t.DeviceBytes), "host_bytes": i64(t.HostBytes),
			"optimizer_hbm": i64(t.OptimizerHBM), "pcie_each_way": i64(t.PCIeEachWay),
			"pcie_gbps":       starlark.Float(t.Transfer.LinkGBps),
			"pcie_round_trip": starlark.Float(t.Transfer.PCIeSeconds),
			"host_access":     starlark.Float(t.Transfer.Host.Seconds),
			"host_assumption": starlark.String(""),
		}
		if t.Placement == "host" {
			f["host_assumption"] = starlark.String(t.Transfer.Host.Assumption())
		}
		out[i] = host.Record(plain, f)
	}
	return host.FrozenList(out)
}

// modulesField is r.modules: the step by module and its terms outside
// the modules, one struct (or, plain, dict) per row.
func modulesField(x *Report, plain bool) starlark.Value {
	if !x.HasTime() {
		return starlark.None
	}
	rows := x.r.Time.Modules
	out := make([]starlark.Value, len(rows))
	for i, m := range rows {
		f := func(v float64) starlark.Value { return starlark.Float(v) }
		out[i] = host.Record(plain, starlark.StringDict{
			"name": starlark.String(m.Name), "count": starlark.MakeInt64(m.Count),
			"flops": f(m.FLOPs), "bytes": f(m.Bytes),
			"forward": f(m.Forward), "backward": f(m.Backward), "recompute": f(m.Recompute), "launch": f(m.Launch),
			"seconds": f(m.Seconds), "bound": starlark.String(m.Bound),
		})
	}
	return host.FrozenList(out)
}
