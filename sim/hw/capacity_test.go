package hw

import (
	"strings"
	"testing"
)

// TestCatalogCapacities holds each catalog device's memory to the public
// evidence it quotes: PyTorch's total (torch.cuda.get_device_properties()
// .total_memory, which is the CUDA runtime's totalGlobalMem that
// deviceQuery prints, and the "total capacity" of PyTorch's OOM message)
// and nvidia-smi's memory.total. A figure in MiB is as torch prints it
// (total_memory / 2^20, rounded down) or as nvidia-smi prints it; in GiB,
// to two decimals as an OOM message prints it.
func TestCatalogCapacities(t *testing.T) {
	const thamada = "https://github.com/thamada/nvidia-smi/blob/c4c8a463a61e4ac67e3d7956da104b302760a498/gls/"
	const achatbot = "https://github.com/ai-bot-pro/achatbot/blob/298019b35ebdd32d4ec0daae998b2308099ba77c/deploy/modal/src/llm/vllm/vlm/skywork_r1v.py"
	for _, tc := range []struct {
		name       string
		torch      int64  // bytes; 0 where no public figure was found
		torchQuote string // the evidence, as printed
		torchURL   string
		smi        int64
		smiQuote   string
		smiURL     string
	}{
		{"V100-16GB", 0, "", "",
			16_160 << 20, "V100-SXM2-16GB: 16160MiB", "shared/research/calibration.md D1 (RECALLED)"},
		{"V100-32GB", 32_502 << 20, "GPU 3; 31.74 GiB total capacity", "https://github.com/haotian-liu/LLaVA/issues/812",
			32_510 << 20, "V100-SXM2-32GB: 32510MiB", "shared/research/calibration.md D1 (RECALLED)"},
		{"A100-40GB", 42_298_834_944, `"NVIDIA A100-SXM4-40GB" Total amount of global memory: 40339 MBytes (42298834944 bytes)`,
			"https://github.com/bottlerocket-os/bottlerocket/pull/3873",
			40_960 << 20, "A100 40GB: 40960MiB (42.94 GB)", "https://github.com/modal-labs/modal-client/pull/2797"},
		{"A100-80GB", 85_100_068_864, `"NVIDIA A100-SXM4-80GB" Total amount of global memory: 81158 MBytes (85100068864 bytes)`,
			thamada + "A100SXMx4_deviceQuery.py",
			81_920 << 20, "1MiB /  81920MiB", thamada + "A100SXMx4_smi.py"},
		{"H100-80GB", 85_045_477_376, `"NVIDIA H100 80GB HBM3" Total amount of global memory: 81106 MBytes (85045477376 bytes)`,
			thamada + "H100SXMx8_deviceQuery.py",
			81_559 << 20, "1MiB /  81559MiB", thamada + "H100SXMx8_smi.py"},
		// Two OOM messages on one H100 PCIe print 79.19 GiB (context_oom_test.go:
		// Difflet's and FoundationTS's, torch 2.8-2.9): 81,085-81,095 MiB to two
		// decimals; the catalog takes the middle, 81,090 MiB.
		{"H100-PCIe", 81_090 << 20, "GPU 0 has a total capacity of 79.19 GiB",
			"https://github.com/ai-decentralized/Difflet/blob/106b0e6766332a1f70f00323103c0881dc16ed74/benchmark/h100/hunyuan_video_15.md",
			81_559 << 20, "assumed equal to the H100 SXM", "shared/research/calibration.md D1 (RECALLED)"},
		{"H100-NVL", 99_861_594_112, `"NVIDIA H100 NVL" Total amount of global memory: 95235 MBytes (99861594112 bytes)`,
			thamada + "H100NVLx2_deviceQuery.py",
			95_830 << 20, "0MiB /  95830MiB", thamada + "H100NVLx2_smi.py"},
		// Measured with driver 580.159.04; torch printed total_memory=143156MB
		// (at least 150,110,011,392 B) on achatbot's machine, another driver.
		{"H200", 150_109_880_320, "device0 NVIDIA H200 cc 9.0 total_memory 150109880320",
			"sim/testdata/cuda_h200/env.txt (measured on one H200, tools/oracle/cuda_run.sh)",
			143_771 << 20, "0MiB / 143771MiB", "sim/testdata/cuda_h200/env.txt; shared/SEEDS.md story 1"},
		{"B200", 182_642 << 20, "_CudaDeviceProperties(name='NVIDIA B200', major=10, minor=0, total_memory=182642MB, ...)",
			achatbot,
			183_359 << 20, "183359MiB", "https://github.com/NVIDIA/TensorRT-LLM/issues/10278"},
		{"MI300X", 196_592 << 20, "[GPU 0] 196592: Total Global Memory (MB)", thamada + "MI300X_x4_deviceQuery.py",
			196_592 << 20, "VRAM Total Memory (B): 206141652992", "https://github.com/ROCm/legacy-rocm-build/issues/4750"},
		{"L40S", 47_803_596_800, `"NVIDIA L40S" Total amount of global memory: 45589 MBytes (47803596800 bytes)`,
			thamada + "L40S_deviceQuery.py",
			46_068 << 20, "1MiB /  46068MiB", thamada + "L40S_smi.py"},
		{"A6000", 0, "", "",
			49_140 << 20, "RTX A6000: 49140MiB", "RTX A6000 datasheet (RECALLED)"},
		{"RTX-3090", 25_327_697_920, `"NVIDIA GeForce RTX 3090" Total amount of global memory: 24154 MBytes (25327697920 bytes)`,
			thamada + "RTX3090_deviceQuery.py",
			24_576 << 20, "2MiB /  24576MiB", thamada + "RTX3090_smi.py"},
		{"RTX-4090", 25_386_352_640, `"NVIDIA GeForce RTX 4090" Total amount of global memory: 24210 MBytes (25386352640 bytes)`,
			thamada + "RTX4090_deviceQuery.py",
			24_564 << 20, "2MiB /  24564MiB", thamada + "RTX4090_smi.py"},
	} {
		d, err := LookupDevice(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if d.SMIMemory != tc.smi {
			t.Errorf("%s: nvidia-smi total %d, want %d (%q, %s)", tc.name, d.SMIMemory, tc.smi, tc.smiQuote, tc.smiURL)
		}
		want := tc.torch
		if want == 0 { // no public figure: the nvidia-smi total stands in, and the source says so
			want = tc.smi
			if !strings.Contains(d.Source, "not found in a public source") {
				t.Errorf("%s: memory is the nvidia-smi total, but its source does not say so: %s", tc.name, d.Source)
			}
		}
		if d.Memory != want {
			t.Errorf("%s: memory %d, want %d (%q, %s)", tc.name, d.Memory, want, tc.torchQuote, tc.torchURL)
		}
		if d.Memory > d.SMIMemory {
			t.Errorf("%s: PyTorch's total %d above nvidia-smi's %d", tc.name, d.Memory, d.SMIMemory)
		}
	}
}
