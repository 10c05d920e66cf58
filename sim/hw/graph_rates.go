package hw

// GraphKernels is what PyTorch's eager kernels of PyG's message passing
// reach on a GPU, per access pattern (timing/graph.go prices the graph
// ops from them). A zero GraphKernels (a GPU without a measurement) leaves
// those ops priced from their bytes at the copy rate.
//
// Each pattern is recorded as what bounds it in the measurement:
//
//   - patterns whose time follows their bytes (the row gathers, the
//     broadcast multiply) as a fraction of the HBM peak (HBMGBps);
//   - patterns whose time follows their element count whatever the
//     dtype's width (an fp32 index_add_ moves twice the bytes of an fp16
//     one in less time) as elements (or rows) per second: per-element
//     work in the SMs (index arithmetic, atomics), not bandwidth.
//
// Fractions of the peak rather than of memsh's copy rate (KernelRates.HBM)
// so that what the copy rate stands for (a copy kernel, or the median of
// the streaming kernels) can change without moving these.
type GraphKernels struct {
	// GatherDRAM is the fraction of the peak a row gather's DRAM bytes
	// (timing's access-pattern count: the index, the rows read that miss
	// half the L2, the output) stream at; GatherWrite the fraction its
	// output is written at when its reads hit L2 (sorted indices); and
	// GatherRows the rows per second it copies at most (rows of 1 KiB).
	GatherDRAM, GatherWrite, GatherRows float64
	// IndexAdd is index_add_'s (index_select's backward) elements per
	// second, 2-byte and 4-byte elements, with 32-bit index arithmetic;
	// IndexAdd64 with 64-bit (tensors of more than 2^31 elements).
	IndexAdd, IndexAdd64 [2]float64
	// IndexPut is the elements per second of index_put_ with accumulate
	// over 2-byte elements (advanced indexing's backward, IndexBackward0:
	// ATen's index_put_with_sort_kernel, whose indexing_backward_kernel
	// adds each sorted index's gradient rows into its destination row);
	// 0 unmeasured (fp32).
	IndexPut float64
	// ScatterAdd is scatter_add_'s elements per second (PyG's sum
	// aggregation), 2-byte and 4-byte elements.
	ScatterAdd [2]float64
	// Broadcast is the fraction of the peak a multiply of [rows, h, d] by
	// [rows, h, 1] streams its bytes (both inputs and the output) at:
	// 2-byte operands, 4-byte, and a 2-byte input with 4-byte factor and
	// output (autocast's bf16 message times fp32 weights).
	Broadcast [3]float64
	// HeadSumRows is the rows per second of a sum over the last dim of
	// [rows, d] with d <= HeadSumMax (per-head scores); HeadSumElems the
	// elements per second of the same sum over 2-byte elements, whichever
	// is slower.
	HeadSumRows, HeadSumElems float64
	HeadSumMax                int64
	Source                    string
}

// Measured returns whether g holds a measurement.
func (g GraphKernels) Measured() bool { return g.GatherDRAM > 0 }

// PyG's eager kernels on one H200 (torch 2.11.0+cu130; sim/testdata/
// cuda_h200/graph_kernels.jsonl, tools/oracle/graph_kernels.py run by
// tools/oracle/cuda_run2.sh): fp16, bf16 and fp32 at Bris's processor
// (261,634 nodes, 2,093,072 edges), encoder (1,359,281 to 261,634,
// 3,139,608 edges) and decoder (261,634 to 1,359,281, 4,077,843 edges)
// graphs at 1024 channels and 16 heads, and anemoi-core PR #631's h_to_h
// (40,962 nodes, 327,600 edges) and h_to_era (40,962 to 542,080,
// 1,626,240 edges) at 512 channels. The copy kernel on the same machine
// (extra.jsonl, part "elementwise", 2^28 bf16) streams 3,910 GB/s, 0.815
// of the 4,800 GB/s peak; a contiguous add over the graphs' [edges, C]
// 4,390 GB/s (0.915).
//
//   - Row gathers (index_select, gather): at random source indices the
//     rows miss L2 and the gather streams its access-pattern bytes at
//     0.734 of the peak (the median of the nine random rows of 2 KiB and
//     4 KiB, 0.722-0.796: 0.90 of the copy); at sorted destination
//     indices the reads hit L2 and the output is written at 0.53 of the
//     peak (2,548 GB/s, Bris's rows of 2 and 4 KiB); rows of 1 KiB copy
//     at most 1.63 G rows a second (PR #631's fp16 rows) whatever their
//     bytes.
//   - index_add_: 118.7 G elements/s for 2-byte elements and 137 G for
//     4-byte (processor and PR #631's graphs, 112-145), 83.5 G and 92.6 G
//     on the encoder's and decoder's [3.1 and 4.1 M, 1024] gradients (82.6
//     -95.3), past 2^31 elements, where ATen's indexFuncLargeIndex does its
//     index arithmetic in 64 bits (canUse32BitIndexMath in Indexing.cu).
//     2.2 to 3.1 times slower per element than scatter_add_ below, which
//     does the same atomic adds from TensorIterator's offset calculator.
//   - scatter_add_ over an expanded index: 270 G elements/s for 2-byte
//     elements (260-278), 360 G for 4-byte (325-372), the zero fill of
//     its output at the copy rate apart.
//   - index_put_ with accumulate (IndexPut, 2-byte elements): 414.7 G
//     elements/s, from the torch.profiler step of the small Qwen3-MoE
//     with grouped_mm experts (hf_profile.jsonl, qwen3_moe_bf16, run
//     19; tools/oracle/cuda_hf.py --profile): indexing_backward_kernel<
//     c10::BFloat16, 4> 16 calls in 2.589 ms, the backward of
//     hidden_states[perm // top_k] and weighted_out[inv_perm] in each of
//     8 layers, each over 65,536 x 1,024 gradient elements (2 x 8 x
//     67,108,864 in 2.589 ms). The other measurement of the kernel, 254
//     calls in 1.740 ms in the per-expert loop (current_state's backward,
//     about 258 rows of 1,024 a call), is 6.9 µs a call: its small calls
//     are launch-bound, no check of the rate.
//   - v.view(E, H, d) * alpha.view(E, H, 1): a broadcast operand takes
//     TensorIterator off its vectorised path, 0.346 of the peak in fp16
//     and bf16 (0.323-0.348), 0.569 in fp32 (0.542-0.570), 0.300 for a
//     16-bit v times fp32 alpha into fp32 (0.288-0.316), where a
//     contiguous add reaches 0.915.
//   - p.view(E, H, d).sum(-1), d = 32 and 64: 4.6 G rows/s in fp32 and
//     at d = 32 in 16 bits (4.46-4.76), and 166 G elements/s at d = 64 in
//     16 bits (164-167): 0.06 to 0.24 of the peak.
//
// timing/graph_rates_test.go prices each measured row from these.
var hopperGraph = GraphKernels{
	GatherDRAM: 0.734, GatherWrite: 0.53, GatherRows: 1.63e9,
	IndexAdd: [2]float64{118.7e9, 137e9}, IndexAdd64: [2]float64{83.5e9, 92.6e9},
	IndexPut:    414.7e9,
	ScatterAdd:  [2]float64{270e9, 360e9},
	Broadcast:   [3]float64{0.346, 0.569, 0.300},
	HeadSumRows: 4.6e9, HeadSumElems: 166e9, HeadSumMax: 64,
	Source: "PyG's eager kernels measured on one H200 (torch 2.11.0+cu130; sim/testdata/cuda_h200/graph_kernels.jsonl, " +
		"tools/oracle/graph_kernels.py, tools/oracle/cuda_run2.sh; index_put_ from hf_profile.jsonl, tools/oracle/cuda_hf.py --profile)",
}

// withGraph is k with the graph kernels g.
func (k KernelRates) withGraph(g GraphKernels) KernelRates {
	k.Graph = g
	return k
}
