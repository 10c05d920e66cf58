package core

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// cuBLAS's workspace, as PyTorch sizes it (aten/src/ATen/cuda/
// CublasHandlePool.cpp, parseChosenWorkspaceSize): CUBLAS_WORKSPACE_CONFIG
// is ":SIZE:COUNT" pairs, SIZE in KiB, their products summed; unset, the
// default is ":4096:2:16:8" (8 MiB + 128 KiB: the 8,519,680 bytes
// pytorch/pytorch#95668 saw left allocated after one Linear on an A10G),
// 32 MiB on Hopper (sm90, cuBLAS's recommendation for it) and on Blackwell
// (pytorch/pytorch#175344); on ROCm hipBLAS takes 32 MiB, 128 MiB on
// gfx94x and gfx95x (the MI300 series; pytorch/pytorch#138791 made ROCm
// allocate it through the caching allocator too).

// workspacePair is one ":SIZE:COUNT" of CUBLAS_WORKSPACE_CONFIG.
var workspacePair = regexp.MustCompile(`:([0-9]+):([0-9]+)`)

// parseWorkspaceConfig is CUBLAS_WORKSPACE_CONFIG's bytes; ok is false
// when it holds no ":SIZE:COUNT" pair.
func parseWorkspaceConfig(s string) (n int64, ok bool) {
	for _, m := range workspacePair.FindAllStringSubmatch(s, -1) {
		size, err1 := strconv.ParseInt(m[1], 10, 64)
		count, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || size > 1<<24 || count > 1<<10 {
			return 0, false
		}
		n += size * 1024 * count
		ok = true
	}
	return n, ok && n <= 1<<34
}

// validateWorkspaceConfig checks CUBLAS_WORKSPACE_CONFIG; PyTorch warns
// and takes its default where memsh stops with an error, so that a typo
// never yields a silent figure.
func validateWorkspaceConfig(s string) error {
	if s == "" {
		return nil
	}
	if _, ok := parseWorkspaceConfig(s); !ok {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("cublas_workspace_config %q is not CUBLAS_WORKSPACE_CONFIG's :SIZE:COUNT form (SIZE in KiB, at most 16 GiB in all)", s),
			Hint: `":4096:8" (32 MiB) or ":16:8" (128 KiB), as the deterministic-algorithms notes set it`}
	}
	return nil
}

// CublasWorkspace is the bytes of one cuBLAS workspace on dev: the
// plan's CUBLAS_WORKSPACE_CONFIG, or PyTorch's default for the GPU.
func (m RuntimeMemory) CublasWorkspace(dev hw.Device) int64 {
	if n, ok := parseWorkspaceConfig(m.CublasWorkspaceConfig); ok {
		return n
	}
	n := strings.ToUpper(dev.Name)
	switch {
	case strings.HasPrefix(n, "MI3"): // gfx942, gfx950
		return 128 << 20
	case strings.HasPrefix(n, "MI"):
		return 32 << 20
	case strings.HasPrefix(n, "H1"), strings.HasPrefix(n, "H2"), strings.HasPrefix(n, "GH"),
		strings.HasPrefix(n, "B"), strings.HasPrefix(n, "GB"):
		return 32 << 20
	}
	return 4096*1024*2 + 16*1024*8
}

// cuBLASLt's workspace (aten/src/ATen/cuda/CublasHandlePool.cpp at
// pytorch/pytorch 26a39059, getCUDABlasLtWorkspaceSize and
// getCUDABlasLtWorkspace): CUBLASLT_WORKSPACE_SIZE KiB, 1,024 by default
// ("default size in KiB according to #73328"), capped at the cuBLAS
// workspace (the unified size, on unless TORCH_CUBLASLT_UNIFIED_WORKSPACE
// is set false); the buffer itself is cuBLAS's only when
// TORCH_CUBLASLT_UNIFIED_WORKSPACE=1, otherwise one of its own per
// (handle, stream), allocated through the caching allocator at the first
// cuBLASLt call and kept (cublaslt_handle_stream_to_workspace; on CUDA the
// Lt handle is the thread's cuBLAS handle). cuBLASLt runs an addmm whose
// self is a 1-D bias (aten/src/ATen/native/cuda/Blas.cpp at 960a6846,
// addmm_out_cuda_impl: useLtInterface, unless DISABLE_ADDMM_CUDA_LT=1),
// which is nn.Linear with a bias, and torch._scaled_mm. ROCm's hipBLASLt
// (76 MiB, and the preferred backend on some releases) is not modelled.

// CublasLtWorkspace is the bytes of one cuBLASLt workspace on dev, 0 on
// ROCm (not modelled).
func (m RuntimeMemory) CublasLtWorkspace(dev hw.Device) int64 {
	if strings.HasPrefix(strings.ToUpper(dev.Name), "MI") {
		return 0
	}
	return min(1<<20, m.CublasWorkspace(dev))
}

// CublasLt reports whether op runs on cuBLASLt in its forward: a matmul
// that adds a bias (reads a 1-D parameter: addmm's bias epilogue), or
// torch._scaled_mm. Only _scaled_mm runs on it in the backward too (a
// Linear's backward is two mm and a sum).
func (p *Program) CublasLt(op *OpInfo) bool {
	if op.ScaledMM {
		return true
	}
	if op.Kind != "matmul" || op.TEGemm { // TE's GEMM: its own workspace (megatron_te.go)
		return false
	}
	for _, pi := range op.Params {
		if len(p.Params[pi].Shape) == 1 {
			return true
		}
	}
	return false
}
