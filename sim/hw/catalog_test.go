package hw

import (
	"strings"
	"testing"
)

func TestCatalogEntries(t *testing.T) {
	want := []string{
		"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB",
		"H100-PCIe", "H100-NVL", "H200", "B200", "MI300X", "L40S", "A6000",
		"RTX-3090", "RTX-4090",
	}
	seen := map[string]bool{}
	for _, d := range Catalog() {
		if seen[d.Name] {
			t.Errorf("duplicate catalog entry %s", d.Name)
		}
		seen[d.Name] = true
		if d.Memory <= 0 || d.BF16TFLOPS <= 0 || d.FP32TFLOPS <= 0 || d.HBMGBps <= 0 || d.PCIeGBps <= 0 {
			t.Errorf("%s: missing figure: %+v", d.Name, d)
		}
		if d.Context <= 0 || d.Context >= d.Memory {
			t.Errorf("%s: context %d out of range", d.Name, d.Context)
		}
		if d.SMIMemory%catalogMiB != 0 || d.SMIMemory < d.Memory {
			t.Errorf("%s: nvidia-smi total %d is not whole MiB at least PyTorch's %d", d.Name, d.SMIMemory, d.Memory)
		}
		if d.Source == "" {
			t.Errorf("%s: no source", d.Name)
		}
	}
	for _, n := range want {
		if !seen[n] {
			t.Errorf("catalog lacks %s", n)
		}
	}
}

func TestCatalogFresh(t *testing.T) {
	a := Catalog()
	a[0].Memory = 1
	if Catalog()[0].Memory == 1 {
		t.Fatal("Catalog returned shared state")
	}
}

func TestLookupDevice(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		memory   int64
	}{
		{"H200", "H200", 150_109_880_320}, // measured (TestCatalogCapacities)
		{"h200", "H200", 150_109_880_320},
		{"A100", "A100-80GB", 85_100_068_864},
		{"a100-40gb", "A100-40GB", 42_298_834_944},
		{"H100", "H100-80GB", 85_045_477_376},
		{"H100 SXM", "H100-80GB", 85_045_477_376},
		{"h100_pcie", "H100-PCIe", 81_090 << 20},
		{"NVIDIA GeForce RTX 4090", "RTX-4090", 25_386_352_640},
		{"rtx3090", "RTX-3090", 25_327_697_920},
		{"V100", "V100-16GB", 16_160 << 20},
		{"mi300x", "MI300X", 196_592 << 20},
		{"RTX A6000", "A6000", 49_140 << 20},
	} {
		d, err := LookupDevice(tc.in)
		if err != nil {
			t.Errorf("LookupDevice(%q): %v", tc.in, err)
			continue
		}
		if d.Name != tc.name || d.Memory != tc.memory {
			t.Errorf("LookupDevice(%q) = %s %d, want %s %d", tc.in, d.Name, d.Memory, tc.name, tc.memory)
		}
	}
}

func TestLookupDeviceUnknown(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"H300", `unknown gpu "H300" (close matches: H200`},
		{"A100-60GB", `unknown gpu "A100-60GB" (close matches: A100-40GB, A100-80GB`},
		{"RTX-5090", `unknown gpu "RTX-5090" (close matches: RTX-3090, RTX-4090`},
		{"", `unknown gpu "" (known: V100-16GB, `},
		{"zzzzzzzzzzzz", `unknown gpu "zzzzzzzzzzzz" (known: V100-16GB, `},
	} {
		_, err := LookupDevice(tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("LookupDevice(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}
