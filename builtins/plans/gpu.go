package plans

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// GPU is the Starlark value of a device, from the catalog (gpu("H100")) or
// custom (gpu(name="x", memory=...)). Its type name is "gpu".
type GPU struct{ dev hw.Device }

var (
	_ starlark.HasAttrs   = GPU{}
	_ starlark.Comparable = GPU{}
	_ starlark.Unpacker   = (*GPU)(nil)
)

// NewGPU wraps d.
func NewGPU(d hw.Device) GPU { return GPU{d} }

// Device is the wrapped sim.Device.
func (g GPU) Device() hw.Device { return g.dev }

func (g GPU) Type() string         { return "gpu" }
func (g GPU) Freeze()              {}
func (g GPU) Truth() starlark.Bool { return starlark.True }

func (g GPU) Hash() (uint32, error) {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", g.dev.Name, g.dev.Memory)
	return h.Sum32(), nil
}

// String is gpu("NAME") for an unmodified catalog device, otherwise the
// keyword form that rebuilds it.
func (g GPU) String() string {
	if c, err := hw.LookupDevice(g.dev.Name); err == nil && sameFigures(c, g.dev) && c.Name == g.dev.Name {
		return fmt.Sprintf("gpu(%q)", g.dev.Name)
	}
	d := g.dev
	var b strings.Builder
	fmt.Fprintf(&b, "gpu(name=%q, memory=%d", d.Name, d.Memory)
	if d.SMIMemory != 0 && d.SMIMemory != d.Memory {
		fmt.Fprintf(&b, ", smi_memory=%d", d.SMIMemory)
	}
	for _, f := range []struct {
		k       string
		v       float64
		assumed bool
	}{
		{"bf16_tflops", d.BF16TFLOPS, false}, {"fp32_tflops", d.FP32TFLOPS, false}, {"fp8_tflops", d.FP8TFLOPS, false},
		{"hbm_gbps", d.HBMGBps, false}, {"link_gbps", d.LinkGBps, d.LinkAssumed}, {"pcie_gbps", d.PCIeGBps, d.PCIeAssumed},
	} {
		if f.v != 0 && !f.assumed { // a default stands in for a figure not given: leave it out, as the call did
			fmt.Fprintf(&b, ", %s=%s", f.k, strconv.FormatFloat(f.v, 'g', -1, 64))
		}
	}
	fmt.Fprintf(&b, ", context=%d)", d.Context)
	return b.String()
}

// sameFigures compares devices ignoring Source.
func sameFigures(a, b hw.Device) bool {
	a.Source, b.Source = "", ""
	return a == b
}

var gpuAttrNames = []string{
	"bf16_tflops", "context", "fp32_tflops", "fp8_tflops", "hbm_gbps",
	"link_gbps", "memory", "name", "pcie_gbps", "smi_memory", "source",
}

func (g GPU) AttrNames() []string { return gpuAttrNames }

func (g GPU) Attr(name string) (starlark.Value, error) {
	d := g.dev
	switch name {
	case "name":
		return starlark.String(d.Name), nil
	case "memory":
		return starlark.MakeInt64(d.Memory), nil
	case "smi_memory":
		return starlark.MakeInt64(d.SMITotal()), nil
	case "context":
		return starlark.MakeInt64(d.Context), nil
	case "bf16_tflops":
		return starlark.Float(d.BF16TFLOPS), nil
	case "fp32_tflops":
		return starlark.Float(d.FP32TFLOPS), nil
	case "fp8_tflops":
		return starlark.Float(d.FP8TFLOPS), nil
	case "hbm_gbps":
		return starlark.Float(d.HBMGBps), nil
	case "link_gbps":
		return starlark.Float(d.LinkGBps), nil
	case "pcie_gbps":
		return starlark.Float(d.PCIeGBps), nil
	case "source":
		return starlark.String(d.Source), nil
	}
	return nil, nil
}

func (g GPU) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	eq := sameFigures(g.dev, y.(GPU).dev)
	switch op {
	case syntax.EQL:
		return eq, nil
	case syntax.NEQ:
		return !eq, nil
	}
	return false, fmt.Errorf("%s %s %s not supported", g.Type(), op, y.Type())
}

// Unpack accepts a gpu value or a catalog name ("H100"), so builtins can
// declare a GPU parameter for UnpackArgs.
func (g *GPU) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case GPU:
		*g = v
		return nil
	case starlark.String:
		d, err := hw.LookupDevice(string(v))
		if err != nil {
			return err
		}
		*g = GPU{d}
		return nil
	}
	return fmt.Errorf("got %s, want gpu or string", v.Type())
}

// The documented defaults of a custom device's figures not given.
const (
	// defaultCustomContext is the catalog's typical CUDA context with lazy
	// module loading.
	defaultCustomContext = 500 << 20
	// fp32PerBF16 is the fp32 (non-tensor-core) peak as a share of the
	// bf16 tensor peak on an A100: 19.5 / 312 = 1/16 (calibration.md D1).
	fp32PerBF16 = 1.0 / 16
	// defaultPCIeGBps is PCIe Gen4 x16 per direction (calibration.md D2).
	defaultPCIeGBps = 32
)

func GpuBuiltins() []host.Builtin {
	names := make([]string, 0, 16)
	for _, d := range hw.Catalog() {
		names = append(names, fmt.Sprintf("%s (%s, nvidia-smi %s)", d.Name, units.FormatBytes(d.Memory), host.Thousands(d.SMITotal()>>20)+" MiB"))
	}
	return []host.Builtin{{
		Name: "gpu",
		Sig: "gpu(name, memory=None, bf16_tflops=None, fp32_tflops=None, fp8_tflops=None, " +
			"hbm_gbps=None, link_gbps=None, pcie_gbps=None, context=None, smi_memory=None)",
		Doc: "Returns a GPU from the catalog, or a custom one. gpu(\"H100\") looks name up " +
			"(case-insensitive; H100 is H100-80GB, A100 is A100-80GB); an unknown name is an error " +
			"listing close matches. With more arguments it overrides catalog figures " +
			"(gpu(\"H100\", memory=96 * GiB)) or, for a name not in the catalog, defines a custom " +
			"device, which needs memory=.\n\n" +
			"memory is the capacity in bytes as PyTorch sees it: torch.cuda.get_device_properties().total_memory, " +
			"the \"total capacity\" of its OOM message, which the step must fit in. It is below the total nvidia-smi " +
			"shows by what the driver reserves (about 450-900 MiB on recent drivers, none on ROCm); smi_memory is " +
			"that nvidia-smi total (default: memory), the figure to compare r.device_used with on the machine " +
			"(r.smi_total). Catalog figures quote their evidence in .source. bf16_tflops is the dense tensor-core " +
			"peak; fp32_tflops the fp32 peak (default for a custom gpu: bf16_tflops / 16, an A100's ratio); hbm_gbps " +
			"the memory bandwidth in GB/s; link_gbps and pcie_gbps the GPU-GPU and host links per direction in GB/s " +
			"(0: none; for a custom gpu not given, link_gbps=0 and pcie_gbps=32, PCIe Gen4 x16, and a report over " +
			"several GPUs or with host transfers notes the assumption; across nodes the network is the time model's " +
			"100 Gb/s per GPU for a card it does not know unless cluster(inter=) gives it, and the report notes that " +
			"too); context the CUDA context bytes with lazy module loading (default " +
			"500 MiB; the catalog's by GPU generation, from PyTorch's OOM messages: docs/device-memory.md; with runtime \"cuda\" " +
			"the GH100 cards take the context measured on an H200 with torch 2.11 and CUDA 13.0 instead, 766.8 MiB lazy and " +
			"1,796.8 MiB eager (H200, H100-80GB, H100-NVL; H100-PCIe 36 MiB less for its 18 fewer SMs); a context given here " +
			"stands for every runtime). Without bf16_tflops or hbm_gbps the step time is unknown (the report says which is missing). " +
			"Attributes: name, memory, smi_memory, context, bf16_tflops, fp32_tflops, fp8_tflops, hbm_gbps, " +
			"link_gbps, pcie_gbps, source.\n\n" +
			"Catalog (PyTorch's total, nvidia-smi's): " + strings.Join(names, ", ") + ".",
		Fn: gpuFn,
	}}
}

func gpuFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var memory, bf16, fp32, fp8, hbm, link, pcie, context, smi starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs,
		"name", &name, "memory?", &memory, "bf16_tflops?", &bf16, "fp32_tflops?", &fp32,
		"fp8_tflops?", &fp8, "hbm_gbps?", &hbm, "link_gbps?", &link, "pcie_gbps?", &pcie,
		"context?", &context, "smi_memory?", &smi); err != nil {
		return nil, err
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("gpu takes its figures by keyword (got %d positional arguments, want 1: name)", len(args))
	}
	given := func(v starlark.Value) bool { return v != nil && v != starlark.None }
	custom := false
	for _, v := range []starlark.Value{memory, bf16, fp32, fp8, hbm, link, pcie, context, smi} {
		custom = custom || given(v)
	}
	d, err := hw.LookupDevice(name)
	if !custom {
		if err != nil {
			return nil, err
		}
		return GPU{d}, nil
	}
	where := host.PosString(host.CallerPos(thread))
	if err != nil {
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("gpu name must not be empty")
		}
		if !given(memory) {
			return nil, fmt.Errorf("%v; a custom gpu needs memory=", err)
		}
		d = hw.Device{Name: name, Context: defaultCustomContext, Source: "custom gpu() at " + where,
			LinkAssumed: !given(link), PCIeAssumed: !given(pcie)}
		if d.PCIeAssumed {
			d.PCIeGBps = defaultPCIeGBps
		}
	} else {
		d.Source = fmt.Sprintf("%s catalog entry, changed by gpu() at %s; %s", d.Name, where, d.Source)
	}
	if given(memory) {
		n, err := host.AsInt64(memory, "memory")
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("memory must be positive (got %d bytes)", n)
		}
		d.Memory = n
		if !given(smi) && d.SMIMemory < n {
			d.SMIMemory = 0 // a catalog card given more memory: nvidia-smi's total is no longer known
		}
	}
	if given(smi) {
		n, err := host.AsInt64(smi, "smi_memory")
		if err != nil {
			return nil, err
		}
		if n < d.Memory {
			return nil, fmt.Errorf("smi_memory (%s) must be at least memory (%s): nvidia-smi's total includes what PyTorch sees",
				units.FormatBytes(n), units.FormatBytes(d.Memory))
		}
		d.SMIMemory = n
	}
	if given(context) {
		n, err := host.AsInt64(context, "context")
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("context must not be negative (got %d bytes)", n)
		}
		d = d.WithContext(n) // the given context stands for every runtime
	}
	if d.Context >= d.Memory {
		return nil, fmt.Errorf("context (%s) must be smaller than memory (%s)", units.FormatBytes(d.Context), units.FormatBytes(d.Memory))
	}
	for _, f := range []struct {
		name string
		v    starlark.Value
		dst  *float64
	}{
		{"bf16_tflops", bf16, &d.BF16TFLOPS}, {"fp32_tflops", fp32, &d.FP32TFLOPS},
		{"fp8_tflops", fp8, &d.FP8TFLOPS}, {"hbm_gbps", hbm, &d.HBMGBps},
		{"link_gbps", link, &d.LinkGBps}, {"pcie_gbps", pcie, &d.PCIeGBps},
	} {
		if !given(f.v) {
			continue
		}
		x, err := host.AsFloat(f.v, f.name)
		if err != nil {
			return nil, err
		}
		if x < 0 {
			return nil, fmt.Errorf("%s must not be negative (got %s)", f.name, f.v)
		}
		*f.dst = x
	}
	if d.FP32TFLOPS == 0 && !given(fp32) {
		d.FP32TFLOPS = d.BF16TFLOPS * fp32PerBF16
	}
	return GPU{d}, nil
}
