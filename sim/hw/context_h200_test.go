package hw

import "testing"

// The H200's context, measured (issue 28): one H200, sim/testdata/cuda_h200,
// tools/oracle/cuda_run.sh; torch 2.11.0+cu130, CUDA 13.0, cuDNN 9.19,
// driver 580.159.04, CUDA_MODULE_LOADING unset (lazy). Outside the
// allocator is torch.cuda.mem_get_info()'s used (total less free, the
// whole device: no other process ran) less memory_reserved().
//
// cuda_extra.py's context section (extra.jsonl, part "context"), one
// fresh process, each stage after the one before:
//
//	stage                           device used    reserved   allocated   outside
//	init and one tensor             650,969,088   2,097,152         512   618.8 MiB
//	first bf16 matmul               774,701,056  56,623,104  37,749,248   684.8 MiB  (+66 MiB: cuBLAS's handle and kernels)
//	first fp32 matmul               774,701,056  56,623,104  46,137,856   684.8 MiB
//	first addmm (cuBLASLt)          774,701,056  56,623,104  49,283,584   684.8 MiB
//	first SDPA forward and backward 812,449,792  77,594,624  55,575,040   700.8 MiB  (+16 MiB: cuDNN)
//	first cuDNN convolution         837,615,616 100,663,296  59,917,824   702.8 MiB  (+2 MiB)
//	autograd thread's backward      971,833,344 234,881,024 194,135,552   702.8 MiB
//	after empty_cache               793,575,424  56,623,104  45,237,248   702.8 MiB
//
// The allocated column shows cuBLAS's workspaces as the replay makes them
// (sim/core/cublas.go): the first bf16 matmul of two 1024 x 1024 bf16
// tensors allocates 36 MiB, its output (2 MiB), its input (2 MiB) and the
// thread's 32 MiB cuBLAS workspace (Hopper's default); the first biased
// Linear 3 MiB, its 2 MiB output and a 1 MiB cuBLASLt workspace.
//
// After step 2 of each case of measure.py --suite cuda (one process, 22
// cases in order; suite.jsonl, mem_get_info_after_step less the reserve
// after the step) the process held outside the allocator 750.8 MiB
// after case 1 (GPT-2 blocks, eager attention: cuBLAS loaded, no cuDNN),
// 766.8 MiB after cases 2 to 6 (case 2 ran SDPA on cuDNN), 768.8 MiB
// after 7 to 10 and 770.8 MiB from case 11 on: each new kernel a case
// launches is loaded once, lazily. The catalog takes case 2's, a process
// that has trained a transformer with cuBLAS and cuDNN attention.

// h200Outside is one case's device use and reserve after its step 2.
type h200Outside struct {
	cases          string
	used, reserved int64
}

func TestH200ContextMeasured(t *testing.T) {
	const mib = 1 << 20
	rows := []h200Outside{
		{"1 (gpt2 eager)", 13_831_569_408, 13_044_285_440},
		{"2 (gpt2 sdpa, cuDNN)", 5_658_968_064, 4_854_906_880},
		{"7 (embedding)", 11_824_594_944, 11_018_436_608},
		{"22 (the last)", 16_302_014_464, 15_493_758_976},
	}
	want := []float64{750.8125, 766.8125, 768.8125, 770.8125}
	for i, r := range rows {
		if got := float64(r.used-r.reserved) / mib; got != want[i] {
			t.Errorf("case %s: %.4f MiB outside the allocator, want %.4f", r.cases, got, want[i])
		}
	}
	d, err := LookupDevice("H200")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.ContextBytes(false, true); got != rows[1].used-rows[1].reserved {
		t.Errorf("H200 context %d B, measured %d B (case 2)", got, rows[1].used-rows[1].reserved)
	}
	// The bare context (init, one tensor) and what cuBLAS and cuDNN add:
	// the catalog's figure is the bare one plus both, to the MiB.
	bare := int64(650_969_088 - 2_097_152)
	cublas := int64(774_701_056-56_623_104) - bare
	cudnn := int64(812_449_792-77_594_624) - (774_701_056 - 56_623_104)
	if cublas != 66*mib || cudnn != 16*mib {
		t.Errorf("cuBLAS adds %d B, cuDNN %d B outside the allocator; measured 66 and 16 MiB", cublas, cudnn)
	}
	if got := d.ContextBytes(false, true) - (bare + cublas + cudnn); got < 0 || got > 70*mib {
		t.Errorf("catalog context less the bare context, cuBLAS and cuDNN: %d B, want the case's own kernels (0 to 70 MiB)", got)
	}
}

// The same context section with CUDA_MODULE_LOADING=EAGER (run 5,
// context_eager.jsonl; same stack, a fresh process):
//
//	stage                           device used     reserved   outside
//	init and one tensor             1,322,057,728   2,097,152  1,258.8 MiB
//	first bf16 matmul               1,894,580,224  56,623,104  1,752.8 MiB  (+494 MiB: cuBLAS loaded whole)
//	first fp32 matmul               1,919,746,048  56,623,104  1,776.8 MiB
//	first addmm (cuBLASLt)          1,919,746,048  56,623,104  1,776.8 MiB
//	first SDPA forward and backward 1,961,689,088  77,594,624  1,796.8 MiB  (cuDNN attention)
//	first cuDNN convolution         2,190,278,656 100,663,296  1,992.8 MiB  (+196 MiB: cuDNN's convolution libraries)
//
// Eager loading costs 1,149 MiB more than lazy at the SDPA stage (700.8
// MiB there, run 1): the figure a user who sets the variable sees.
func TestH200EagerContextMeasured(t *testing.T) {
	const mib = 1 << 20
	lazySDPA := int64(812_449_792 - 77_594_624)
	eagerSDPA := int64(1_961_689_088 - 77_594_624)
	eagerConv := int64(2_190_278_656 - 100_663_296)
	if got := (eagerSDPA - lazySDPA) / mib; got != 1_096 {
		t.Errorf("eager loading adds %d MiB at the SDPA stage, measured 1,096 MiB", got)
	}
	if got := (eagerConv - eagerSDPA) / mib; got != 196 {
		t.Errorf("cuDNN's convolutions add %d MiB under eager loading, measured 196", got)
	}
	d, err := LookupDevice("H200")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.ContextBytes(true, true); got != eagerSDPA {
		t.Errorf("H200 eager context (torch 2.11) %d B, measured %d B", got, eagerSDPA)
	}
	// Older runtimes keep the catalog's rule: the lazy context plus what
	// eager loading added in pytorch/pytorch#86509.
	if got, want := d.ContextBytes(true, false), d.Context+EagerModuleBytes; got != want {
		t.Errorf("H200 eager context (older runtimes) %d B, want %d B", got, want)
	}
}
