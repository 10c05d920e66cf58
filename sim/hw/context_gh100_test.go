package hw

import (
	"math"
	"testing"
)

// The GH100 cards on the current stack (torch 2.11, CUDA 13.0) take the
// H200's measured context less the driver's local-memory reservation of
// the SMs they lack (catalog.go, gh100Context): 2,048 threads an SM x the
// default 1 KiB stack = 2 MiB an SM. Hand-counted:
//
//	card       SMs  lazy                                   eager
//	H200       132  804,061,184 (766.81 MiB, measured)     1,884,094,464 (measured)
//	H100-80GB  132  804,061,184                            1,884,094,464
//	H100-NVL   132  804,061,184                            1,884,094,464
//	H100-PCIe  114  804,061,184 - 18 x 2,097,152           1,884,094,464 - 37,748,736
//	                = 766,312,448 (730.81 MiB)             = 1,846,345,728
//
// Cards of other generations have no current figure and keep their
// generation's (A100: 500 MiB).
func TestGH100CurrentContext(t *testing.T) {
	for _, c := range []struct {
		name        string
		lazy, eager int64
	}{
		{"H200", 804_061_184, 1_884_094_464},
		{"H100-80GB", 804_061_184, 1_884_094_464},
		{"H100-NVL", 804_061_184, 1_884_094_464},
		{"H100-PCIe", 766_312_448, 1_846_345_728},
		{"A100-80GB", 500 << 20, 500<<20 + EagerModuleBytes},
	} {
		d, err := LookupDevice(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.ContextBytes(false, true); got != c.lazy {
			t.Errorf("%s, current stack, lazy: context %d B, want %d", c.name, got, c.lazy)
		}
		if got := d.ContextBytes(true, true); got != c.eager {
			t.Errorf("%s, current stack, eager: context %d B, want %d", c.name, got, c.eager)
		}
		// the older runtimes keep the Ampere/Ada figure on every GH100 card
		if got := d.ContextBytes(false, false); got != 500<<20 {
			t.Errorf("%s, older stacks: context %d B, want the Ampere/Ada 500 MiB", c.name, got)
		}
	}
}

// TestContextDoesNotGrowWithMemory: what the H200 process held outside
// the allocator with 139 GiB reserved is what it held with 4.5 GiB, to
// within the message's rounding, so the context is not scaled by the
// card's memory (the H100's 80 GB take the H200's figure). Measured on one
// H200, sim/testdata/cuda_h200 (torch 2.11, CUDA 13.0): suite case 2
// after its step 2 (context_h200_test.go), and oom.jsonl's Llama-3-8B
// run, which failed in step 1's optimizer step after its forward and
// backward (tools/oracle/cuda_oom.py; sim/oom_h200_test.go).
func TestContextDoesNotGrowWithMemory(t *testing.T) {
	const mib = 1 << 20
	small := float64(5_658_968_064 - 4_854_906_880) // case 2: used - reserved
	f, err := parseOOM("CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 27.12 MiB is free. Including non-PyTorch memory, this process has 139.77 GiB memory in use. Of the allocated memory 134.24 GiB is allocated by PyTorch, and 4.78 GiB is reserved by PyTorch but unallocated.")
	if err != nil {
		t.Fatal(err)
	}
	if reserved := (f.allocated + f.unallocated) / (1 << 30); reserved < 139 {
		t.Fatalf("the OOM's reserve %.2f GiB, want the whole card's 139 GiB", reserved)
	}
	if d := f.outside() - small; math.Abs(d) > f.rounding {
		t.Errorf("outside the allocator: %.1f MiB at 139 GiB reserved, %.1f MiB at 4.5 GiB (differ by %.1f, rounding %.1f)",
			f.outside()/mib, small/mib, d/mib, f.rounding/mib)
	}
}
