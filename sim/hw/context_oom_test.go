package hw

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"testing"
)

// The CUDA context by GPU generation, read from PyTorch's out-of-memory
// messages in public issue threads (issue 28).
//
// From torch 2.1 on the message asks NVML what the process holds on the
// card (pytorch/pytorch#99699, "This PR adds calls to nvml during an OOM
// to find out the total memory in use by the process"): "Including
// non-PyTorch memory, this process has Z memory in use. Of the allocated
// memory A is allocated by PyTorch, and B is reserved by PyTorch but
// unallocated." A + B is what the caching allocator reserved, so Z - A -
// B is everything the process holds outside it: the CUDA context and the
// kernels loaded so far, and whatever other library allocated on its own
// (NCCL's buffers, vLLM's KV cache, cuDNN's handle). Each figure is
// printed to two decimals, so Z - A - B is known to within 10.24 MiB when
// two of them print in GiB.
//
// Inside a container NVML names the process by its host PID, which is not
// the process's own, and the message then reads "Process N has Z memory in
// use" instead of "this process has"; where one process is listed and the
// thread runs one, that is the process.
//
// Rows used for the catalog (contextRows) are jobs of one process that
// loaded no library allocating outside PyTorch's allocator. Left out, with
// what they show outside the allocator:
//   - vllm-project/vllm#27508 (H100, 79.11 GiB): 9.80 GiB, vLLM's KV cache
//     through its own CuMemAllocator;
//   - hiyouga/LlamaFactory#9510 (79.33 GiB card, DeepSpeed on 8 GPUs):
//     1.20 GiB, NCCL's buffers among it;
//   - pytorch/pytorch#126766 (A100 40GB, 39.43 GiB): 1.62 GiB, the job is
//     not shown;
//   - ali-vilab/VGen#104 (RTX 4090, i2vgen-xl inference): 2.15 GiB, the
//     job's libraries not shown;
//   - Kwai-Keye/Keye#11 (79.14 GiB: an 80 GB A100 or H100, the thread does
//     not say): 0.50 GiB.
//
// The catalog's figure per generation is the median of its rows
// (TestCatalogContextIsRowsMedian). Ampere and Ada share one figure:
// Ampere has a single row, and the rows of both lie together (501 MiB on
// an A100, 504-507 MiB on an L40 and an RTX 4090). Lower rows are an RTX
// 4090 still loading its model (380 MiB: fewer kernels loaded) and an RTX
// 6000 Ada (429 MiB). Cards of other generations (T4, H100 PCIe, RTX
// 5090) are recorded, not in the catalog: the context grows with the card
// (T4 100-141 MiB, V100 361-366 MiB, A100 and Ada ~500 MiB, H100 PCIe 599
// and 601 MiB on torch 2.9, RTX 5090 595 MiB). The H100 PCIe rows are one
// card kind on one recent torch, so they do not replace the Ampere/Ada
// figure that the older runtimes give every GH100 card (a change that would
// move every H100 row replayed on them); the current stack's GH100 figure
// is the H200's measurement (catalog.go, gh100Context).

// contextRow is one public OOM message.
type contextRow struct {
	source     string  // the thread
	gpu        string  // the card as the thread names it
	generation string  // a catalog group (contextGroups) or the card's own generation
	job        string  // what the process ran and loaded, torch/CUDA where the thread says
	message    string  // the message's figures, verbatim
	wantMiB    float64 // Z - A - B, counted by hand
}

func contextRows() []contextRow {
	return []contextRow{
		{"https://github.com/kvcache-ai/ktransformers/issues/526 (comment of 2025-02-24)", "V100 32GB", "Volta",
			"ktransformers inference of DeepSeek-R1-Distill-Qwen-7B on one GPU (torch 2.4+: torch.OutOfMemoryError)",
			"GPU 0 has a total capacity of 31.73 GiB of which 1.66 GiB is free. Including non-PyTorch memory, this process has 30.07 GiB memory in use. Of the allocated memory 29.35 GiB is allocated by PyTorch, and 376.65 MiB is reserved by PyTorch but unallocated.",
			0.72*1024 - 376.65},
		{"https://github.com/meta-llama/llama/issues/918", "V100 16GB (8 x Tesla V100)", "Volta",
			"llama's example_chat_completion.py, Llama 2 70B chat in 8-way model parallelism, one process per GPU; torch 2.1 (its set_default_tensor_type warning); the failed request, 448 MiB, is one unsharded 28,672 x 8,192 fp16 weight",
			"GPU 3 has a total capacty of 15.77 GiB of which 289.38 MiB is free. Including non-PyTorch memory, this process has 15.49 GiB memory in use. Of the allocated memory 14.66 GiB is allocated by PyTorch, and 483.75 MiB is reserved by PyTorch but unallocated.",
			0.83*1024 - 483.75},
		{"https://github.com/TianheWu/CoSeR/issues/10", "A100 40GB", "Ampere and Ada",
			"CoSeR super-resolution inference (a Stable Diffusion UNet) on one A100",
			"GPU 0 has a total capacity of 39.50 GiB of which 25.24 GiB is free. Including non-PyTorch memory, this process has 14.25 GiB memory in use. Of the allocated memory 12.87 GiB is allocated by PyTorch, and 912.01 MiB is reserved by PyTorch but unallocated.",
			1.38*1024 - 912.01},
		{"https://github.com/QwenLM/Qwen3-VL/issues/2097", "L40", "Ampere and Ada",
			"Qwen3-VL inference with transformers and accelerate on one L40; CUDA 12.8 wheels (nvidia-cublas-cu12 12.8.4.1)",
			"GPU 0 has a total capacity of 44.40 GiB of which 33.26 GiB is free. Including non-PyTorch memory, this process has 11.13 GiB memory in use. Of the allocated memory 10.25 GiB is allocated by PyTorch, and 394.50 MiB is reserved by PyTorch but unallocated.",
			0.88*1024 - 394.50},
		{"https://github.com/3DTopia/Phidias-Diffusion/issues/8", "RTX 4090", "Ampere and Ada",
			"Phidias diffusion inference on one RTX 4090 (torch 2.1: \"capacty\"); another process holds 470.64 MiB beside it",
			"GPU 0 has a total capacty of 23.64 GiB of which 8.26 GiB is free. Process 3419336 has 470.64 MiB memory in use. Including non-PyTorch memory, this process has 14.56 GiB memory in use. Of the allocated memory 13.86 GiB is allocated by PyTorch, and 213.20 MiB is reserved by PyTorch but unallocated.",
			0.70*1024 - 213.20},
		{"https://github.com/DINGYANB/MTVCrafter/issues/21", "RTX 6000 Ada", "Ampere and Ada",
			"MTVCrafter (Wan2.1) video generation on one RTX 6000 Ada",
			"GPU 0 has a total capacity of 44.43 GiB of which 19.00 MiB is free. Including non-PyTorch memory, this process has 44.40 GiB memory in use. Of the allocated memory 43.94 GiB is allocated by PyTorch, and 41.95 MiB is reserved by PyTorch but unallocated.",
			0.46*1024 - 41.95},
		{"https://github.com/RLinf/RLinf/issues/255", "RTX 4090", "Ampere and Ada",
			"RLinf moving its model to the GPU (module.cuda(), no step run yet); driver 550.163.01, CUDA 12.4",
			"GPU 0 has a total capacity of 23.64 GiB of which 264.00 MiB is free. Process 2086283 has 419.48 MiB memory in use. Including non-PyTorch memory, this process has 8.04 GiB memory in use. Process 2797307 has 14.85 GiB memory in use. Of the allocated memory 7.63 GiB is allocated by PyTorch, and 40.11 MiB is reserved by PyTorch but unallocated.",
			0.41*1024 - 40.11},
		{"https://github.com/FoundationVision/GenerateU/issues/10", "T4 (14.75 GiB)", "Turing",
			"GenerateU inference in a container (one process listed, by its host PID); torch 2.1 (\"capacty\")",
			"GPU 0 has a total capacty of 14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Of the allocated memory 14.06 GiB is allocated by PyTorch, and 330.42 MiB is reserved by PyTorch but unallocated.",
			0.46*1024 - 330.42},
		{"https://github.com/hpcaitech/Open-Sora/issues/697", "T4 (Google Colab)", "Turing",
			"Open-Sora 1.2 inference on Colab's T4 (one process listed, by its host PID)",
			"GPU 0 has a total capacity of 14.75 GiB of which 73.06 MiB is free. Process 82243 has 14.67 GiB memory in use. Of the allocated memory 14.55 GiB is allocated by PyTorch, and 23.38 MiB is reserved by PyTorch but unallocated.",
			0.12*1024 - 23.38},
		{"https://github.com/ai-decentralized/Difflet/blob/106b0e6766332a1f70f00323103c0881dc16ed74/benchmark/h100/hunyuan_video_15.md", "H100 PCIe", "Hopper (H100 PCIe)",
			"HunyuanVideo-1.5 inference with stock diffusers on one H100 PCIe (benchmark/h100/RESULTS.md: single GPU, eager, expandable segments); torch 2.9.1, CUDA 12.8",
			"GPU 0 has a total capacity of 79.19 GiB of which 39.43 GiB is free. Including non-PyTorch memory, this process has 39.75 GiB memory in use. Of the allocated memory 39.13 GiB is allocated by PyTorch, and 35.42 MiB is reserved by PyTorch but unallocated.",
			0.62*1024 - 35.42},
		{"https://github.com/sms1097/FoundationTS/blob/0ccdb6a6a1033b13d1570bfb530dd96d0229df24/docs/proflie_training.md (the --no-amp run)", "H100 PCIe", "Hopper (H100 PCIe)",
			"FoundationTS's time-series MoE trained in fp32 (no autocast, eager) on one H100 PCIe; the traceback's torch 2.8 or later",
			"GPU 0 has a total capacity of 79.19 GiB of which 46.50 MiB is free. Including non-PyTorch memory, this process has 79.13 GiB memory in use. Of the allocated memory 77.91 GiB is allocated by PyTorch, and 648.28 MiB is reserved by PyTorch but unallocated.",
			1.22*1024 - 648.28},
		{"https://github.com/Wan-Video/Wan2.1/issues/465", "RTX 5090", "Blackwell (consumer)",
			"Wan2.1 video generation on one RTX 5090",
			"GPU 0 has a total capacity of 31.37 GiB of which 15.88 MiB is free. Including non-PyTorch memory, this process has 31.34 GiB memory in use. Of the allocated memory 30.74 GiB is allocated by PyTorch, and 19.41 MiB is reserved by PyTorch but unallocated.",
			0.60*1024 - 19.41},
	}
}

// contextGroups are the catalog's cards by the rows' generation.
func contextGroups() map[string][]string {
	return map[string][]string{
		"Volta":          {"V100-16GB", "V100-32GB"},
		"Ampere and Ada": {"A100-40GB", "A100-80GB", "A6000", "RTX-3090", "L40S", "RTX-4090"},
	}
}

// oomFigures is what a torch 2.1+ OOM message says the process holds: in
// use (Z), allocated (A, with what private pools hold) and reserved but
// unallocated (B), in bytes, and the most the printed rounding hides in Z
// - A - B.
type oomFigures struct {
	inUse, allocated, unallocated, rounding float64
}

var (
	oomInUseRE     = regexp.MustCompile(`this process has ([0-9.]+ [KMG]?i?B|[0-9]+ bytes) memory in use`)
	oomProcessRE   = regexp.MustCompile(`Process [0-9]+ has ([0-9.]+ [KMG]?i?B|[0-9]+ bytes) memory in use`)
	oomAllocatedRE = regexp.MustCompile(`Of the allocated memory ([0-9.]+ [KMG]?i?B|[0-9]+ bytes) is allocated by PyTorch`)
	oomUnallocRE   = regexp.MustCompile(`and ([0-9.]+ [KMG]?i?B|[0-9]+ bytes) is reserved by PyTorch but unallocated`)
	oomSizeRE      = regexp.MustCompile(`^([0-9.]+) ?(bytes|B|KiB|MiB|GiB)$`)
)

// parseOOMSize reads a size as PyTorch's format_size prints it, and half
// the unit of its last digit.
func parseOOMSize(s string) (bytes, half float64, err error) {
	m := oomSizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("not a size: %q", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, 0, err
	}
	unit := map[string]float64{"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
	half = 0.5 * unit
	if i := regexp.MustCompile(`\.[0-9]+$`).FindString(m[1]); i != "" {
		half = 0.5 * unit * math.Pow(10, -float64(len(i)-1))
	}
	return v * unit, half, nil
}

// parseOOM reads the figures of msg. The process's own use is "this
// process has"; without it, the one "Process N has" (a container's view).
func parseOOM(msg string) (oomFigures, error) {
	var f oomFigures
	in := oomInUseRE.FindStringSubmatch(msg)
	if in == nil {
		procs := oomProcessRE.FindAllStringSubmatch(msg, -1)
		if len(procs) != 1 {
			return f, fmt.Errorf("no \"this process has\" and %d processes listed", len(procs))
		}
		in = procs[0]
	}
	al, un := oomAllocatedRE.FindStringSubmatch(msg), oomUnallocRE.FindStringSubmatch(msg)
	if al == nil || un == nil {
		return f, fmt.Errorf("no allocated or unallocated figure")
	}
	var halves [3]float64
	var err error
	for i, p := range []struct {
		s   string
		dst *float64
	}{{in[1], &f.inUse}, {al[1], &f.allocated}, {un[1], &f.unallocated}} {
		if *p.dst, halves[i], err = parseOOMSize(p.s); err != nil {
			return f, err
		}
	}
	f.rounding = halves[0] + halves[1] + halves[2]
	return f, nil
}

// outside is Z - A - B: what the process holds outside the allocator.
func (f oomFigures) outside() float64 { return f.inUse - f.allocated - f.unallocated }

// TestContextRowsFromOOMMessages: every row's message is read back to
// the figure counted by hand (Z - A - B, in MiB), and its rounding is what
// two decimals of GiB hide (10.24 MiB plus the MiB figure's 0.005).
func TestContextRowsFromOOMMessages(t *testing.T) {
	const mib = 1 << 20
	for _, r := range contextRows() {
		f, err := parseOOM(r.message)
		if err != nil {
			t.Errorf("%s: %v", r.source, err)
			continue
		}
		if got := f.outside() / mib; math.Abs(got-r.wantMiB) > 0.01 {
			t.Errorf("%s: %.2f MiB outside the allocator, counted %.2f", r.source, got, r.wantMiB)
		}
		if got := f.rounding / mib; math.Abs(got-10.245) > 0.001 {
			t.Errorf("%s: rounding %.4f MiB, want 10.245", r.source, got)
		}
	}
}

// TestCatalogContextIsRowsMedian: each catalog card's lazy-loading
// context is its generation's median row, within what the messages'
// rounding hides; the V100's eager figure stays the measured 1,343 MiB.
func TestCatalogContextIsRowsMedian(t *testing.T) {
	const mib = 1 << 20
	byGen := map[string][]oomFigures{}
	for _, r := range contextRows() {
		f, err := parseOOM(r.message)
		if err != nil {
			t.Fatalf("%s: %v", r.source, err)
		}
		byGen[r.generation] = append(byGen[r.generation], f)
	}
	for gen, cards := range contextGroups() {
		rows := byGen[gen]
		if len(rows) < 2 {
			t.Fatalf("%s: %d rows, a catalog figure needs at least two", gen, len(rows))
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].outside() < rows[j].outside() })
		mid := len(rows) / 2
		median, rounding := rows[mid].outside(), rows[mid].rounding
		if len(rows)%2 == 0 {
			median = (rows[mid-1].outside() + rows[mid].outside()) / 2
			rounding = (rows[mid-1].rounding + rows[mid].rounding) / 2
		}
		for _, name := range cards {
			d, err := LookupDevice(name)
			if err != nil {
				t.Fatal(err)
			}
			if got := float64(d.ContextBytes(false, false)); math.Abs(got-median) > rounding {
				t.Errorf("%s (%s): context %.1f MiB, the rows' median %.1f MiB ± %.1f", name, gen, got/mib, median/mib, rounding/mib)
			}
			t.Logf("%s (%s): context %.1f MiB, median of %d rows %.1f MiB", name, gen, float64(d.Context)/mib, len(rows), median/mib)
		}
	}
	v100, _ := LookupDevice("V100-16GB")
	if v100.ContextBytes(true, false) != 1343*mib {
		t.Errorf("V100 eager context %d, want the measured 1,343 MiB", v100.ContextBytes(true, false))
	}
}

// TestParseOOMRefusesOtherMessages: a message without the process's
// figures (several processes listed, or the torch 2.0 form) is refused,
// not read as zero.
func TestParseOOMRefusesOtherMessages(t *testing.T) {
	for _, msg := range []string{
		"Tried to allocate 172.00 MiB (GPU 0; 23.70 GiB total capacity; 22.87 GiB already allocated; 120.75 MiB free; 22.89 GiB reserved in total by PyTorch)",
		"GPU 0 has a total capacity of 14.74 GiB of which 2.44 GiB is free. Process 21197 has 366.00 MiB memory in use. Process 21194 has 8.07 GiB memory in use. Of the allocated memory 7.85 GiB is allocated by PyTorch, and 86.90 MiB is reserved by PyTorch but unallocated.",
	} {
		if f, err := parseOOM(msg); err == nil {
			t.Errorf("read %+v from %q, want an error", f, msg)
		}
	}
}
