package core

import "fmt"

// Runtime captures where PyTorch versions and devices differ in what
// autograd saves and which kernels they run. The default is "cuda": the
// latest PyTorch 2.x (2.11 and later) on a CUDA device.
// "cpu-1.13" reproduces what shared/oracle measured (Debian's torch 1.13 on
// CPU), so the oracle's figures can be checked to the byte; "cpu" is
// PyTorch 2.x on the CPU, where tools/oracle's differential-test vectors
// are measured (torch 2.15: LayerNorm statistics in the input dtype, CPU
// autocast keeps softmax in bf16, mean keeps only sizes).
type Runtime struct {
	Name string
	// RMSNormSavesSquare: torch 1.13 MeanBackward1 keeps its input (x², fp32);
	// 2.x keeps only sizes (oracle REPORT.md section 4).
	RMSNormSavesSquare bool
	// NormStatsFP32: LayerNorm mean/rstd are fp32 on CUDA; on CPU they take the
	// input dtype (oracle REPORT.md section 3).
	NormStatsFP32 bool
	// AutocastSoftmaxFP32: CUDA autocast runs softmax in fp32; CPU autocast
	// does not (oracle REPORT.md section 5).
	AutocastSoftmaxFP32 bool
	// ScalarOperandSaved: torch 1.13 saves the Python scalar of tensor * or /
	// scalar as a 0-dim fp64 tensor (oracle REPORT.md section 3, 8 B); 2.x
	// saves nothing (torch 2.15, tools/oracle vectors).
	ScalarOperandSaved bool
	// CPU: PyTorch on the CPU, which allocates no cuBLAS workspace (on CUDA
	// it comes through the caching allocator: replay's cublasWorkspace; a
	// step recorded with tools/oracle/snapshot.py has no such block).
	CPU bool
	// SDPAEnableGQA: scaled_dot_product_attention takes enable_gqa (torch
	// 2.5 and later), so a library can hand it fewer kv heads than query
	// heads (nn.Attention.EnableGQA). torch 2.15's documentation: GQA works
	// with the flash, cuDNN, memory-efficient (NVIDIA) and math kernels,
	// and on the CPU (tools/oracle/gqa_sdpa.py measures it there).
	SDPAEnableGQA bool
	// PackedSequenceMask: torch 2.6 and later, on which transformers 4.54 to
	// 4.57 combine their packed-sequence mask with the causal one
	// (create_causal_mask's "if packed_sequence_mask is not None and
	// _is_torch_greater_or_equal_than_2_6", masking_utils.py, the 4.57.1
	// wheel line 820; and_masks needs 2.6), so that a forward with neither
	// a cache nor an attention_mask hands SDPA a mask (nn.Attention.NoCacheMask).
	PackedSequenceMask bool
	// SoftmaxSavesInput: torch <= 1.10's softmax and log_softmax kept
	// their input for the backward besides their output (derivatives.yaml:
	// _softmax_backward_data(grad, result, dim, self); pytorch#64000,
	// "Softmax/logsoftmax use more memory for backward than needed"),
	// until #66018 (2021-10-01, after the 1.10 branch cut) kept only its
	// dtype: torch 1.11 and later (softmax_input.go).
	SoftmaxSavesInput bool
	// LegacyOOMMessage: PyTorch 1.10 to 2.0 (and 2.1's nightlies before
	// mid-2023) word the out-of-memory error "Tried to allocate X (GPU 0;
	// T total capacity; A already allocated; F free; R reserved in total
	// by PyTorch)" (c10/cuda/CUDACachingAllocator.cpp at v2.0.0, malloc);
	// the 2.1 release prints "GPU 0 has a total capacity of T of which F
	// is free" and this process's use (replay's oomAt).
	LegacyOOMMessage bool
	// ScalarIndexSelect: torch 2.7 and earlier copy index_select's rows
	// one element per thread (indexSelectLargeIndex, aten/src/ATen/native/
	// cuda/Indexing.cu), which for fp16 and bf16 moves 2 bytes a load.
	// pytorch#152380 (merged 2025-04-29, after the 2.7.0 release of
	// 2025-04-23) copies them 8 bytes at a time: "a 2.5x improvement in
	// memory bandwidth" on an A100 80GB for rows of a multiple of 4
	// elements (its description; pytorch#152242 the same). pytorch#151612
	// (2025-04-17) measured the old kernel against gather's vectorised one:
	// bf16 [4096, 5120], 4096 rows on dim 0, 135.6 µs against 36.3 µs
	// (timing/graph.go prices it).
	ScalarIndexSelect bool
	// SDPACuDNN: scaled_dot_product_attention prefers cuDNN's fused
	// attention on Hopper and Blackwell (check_prefer_cudnn_attention in
	// aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, pytorch#162073
	// for 2.9, gated on cuDNN 9.15.1 or later after pytorch#169849; torch
	// 2.11's wheels bundle cuDNN 9.19, and an H200 ran
	// ScaledDotProductCudnnAttentionBackward0 by default,
	// sim/testdata/cuda_h200). The time model prices it with the GPU's
	// hw.KernelRates.SDPA; earlier runtimes run flash-attn 2's kernel.
	SDPACuDNN bool
	// CurrentStack: the newest stack memsh has measured (torch 2.11,
	// CUDA 13.0, driver 580): a card's context is its CurrentContext
	// where it has one (hw/context.go; the H200's, measured on one H200,
	// sim/testdata/cuda_h200, tools/oracle/cuda_run.sh).
	CurrentStack bool
	// NCCLRecordStreams: ProcessGroupNCCL calls record_stream on a
	// collective's input and output for its NCCL stream (TORCH_NCCL_AVOID_
	// RECORD_STREAMS unset, its default until the stashing of pytorch
	// 8ab5868a made avoiding them the default: "TORCH_NCCL_AVOID_RECORD_
	// STREAMS is the default now", cited by Lightning-AI/lightning-thunder
	// #2405 of 2025-08-07, after the 2.7 release; torch 2.2 to 2.7 already
	// skipped it for synchronous all_gather_into_tensor and
	// reduce_scatter_tensor, pytorch#111431, not for all_to_all_single:
	// alltoall_base records its output, collective() its input). The
	// replay holds such a tensor's block after its free until the host has
	// waited for the device (replay/nccl_record.go).
	NCCLRecordStreams bool
}

// Runtimes lists the known runtimes.
func Runtimes() []Runtime {
	return []Runtime{
		{Name: "cuda", NormStatsFP32: true, AutocastSoftmaxFP32: true, SDPAEnableGQA: true, PackedSequenceMask: true, SDPACuDNN: true, CurrentStack: true},
		// torch 2.8 to 2.10 on CUDA: as "cuda" (but not its measured
		// context), and SDPA runs flash-attn 2's kernel on Hopper
		// (check_prefer_cudnn_attention asks for a newer cuDNN than these
		// wheels bundle; transformers#48163 read it).
		{Name: "cuda-2.10", NormStatsFP32: true, AutocastSoftmaxFP32: true, SDPAEnableGQA: true, PackedSequenceMask: true},
		// torch 2.6 on CUDA (met-no/bris-forecaster's uv.lock: torch
		// 2.6.0+cu124, extreme-bris scripts/setup_env.sh at 2a5a986): as
		// "cuda", and index_select's rows copied an element at a time.
		{Name: "cuda-2.6", NormStatsFP32: true, AutocastSoftmaxFP32: true, SDPAEnableGQA: true, PackedSequenceMask: true, ScalarIndexSelect: true, NCCLRecordStreams: true},
		// torch 2.1 on CUDA: MeanBackward1 still keeps its input (pytorch#109876;
		// #109935 dropped it after the 2.1 branch cut), as the LitGPT tables ran.
		{Name: "cuda-2.1", NormStatsFP32: true, AutocastSoftmaxFP32: true, RMSNormSavesSquare: true, ScalarIndexSelect: true, NCCLRecordStreams: true},
		// torch 2.0 on CUDA: as 2.1, and the out-of-memory error in its older words.
		{Name: "cuda-2.0", NormStatsFP32: true, AutocastSoftmaxFP32: true, RMSNormSavesSquare: true, LegacyOOMMessage: true, ScalarIndexSelect: true, NCCLRecordStreams: true},
		// torch 1.10 on CUDA: softmax and log_softmax keep their input too.
		{Name: "cuda-1.10", NormStatsFP32: true, AutocastSoftmaxFP32: true, RMSNormSavesSquare: true, ScalarOperandSaved: true, SoftmaxSavesInput: true, LegacyOOMMessage: true, ScalarIndexSelect: true, NCCLRecordStreams: true},
		{Name: "cpu-1.13", RMSNormSavesSquare: true, ScalarOperandSaved: true, CPU: true},
		{Name: "cpu", CPU: true, SDPAEnableGQA: true, PackedSequenceMask: true},
	}
}

// LookupRuntime finds a runtime by name.
func LookupRuntime(name string) (Runtime, error) {
	if name == "" {
		name = "cuda"
	}
	for _, r := range Runtimes() {
		if r.Name == name {
			return r, nil
		}
	}
	return Runtime{}, fmt.Errorf("unknown runtime %q (known: cuda, cuda-2.10, cuda-2.6, cuda-2.1, cuda-2.0, cuda-1.10, cpu-1.13, cpu)", name)
}
