package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// TestSlidingWindowMask: sliding windows (Mistral's and Phi-3's in every
// layer, Gemma 2's and Gemma 3's in their local layers) as transformers
// runs them on the CPU (bf16, torch 2.15.0). torch's SDPA has no window: once the sequence reaches
// sliding_window (masking_utils _ignore_causal_mask_sdpa: kv_length >=
// the window) transformers hands it the sliding mask, which it keeps as
// an additive bias in every layer, and k and v reach it expanded to every
// head (repeat_kv: no enable_gqa with a mask); under the window it passes
// no mask, as without one. Eager attention gets a mask either way (the
// window changes its values, not its size). The bytes autograd saves,
// per
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/CONFIG 2 1 SEQ bfloat16 ATTN nocache
//
// for mistral-tiny.json and phi3-tiny.json (2 layers, 4 heads of 16 for
// 2 kv heads, no window) and the same with sliding_window 16 (-w16) and
// 512 (-w512), under transformers 5.25.0 (Mistral's also under 5.17.0,
// and without nocache: the same figures):
//
//	mistral sdpa  seq 64: none 418,060; w512 418,060; w16 450,828 (+32,768)
//	mistral sdpa  seq 16: none 104,524; w16 109,644 (+5,120)
//	phi3    sdpa  seq 64: none 459,020; w512 459,020; w16 467,212 (+8,192)
//	phi3    sdpa  seq 16: none 114,764; w16 113,740 (-1,024)
//	phi3    eager seq 64: none 629,004; w16 629,004; seq 16: 120,396 both
//
// and gemma2-tiny.json and gemma3-tiny.json (the same shapes; layer 0
// local, layer 1 global: Gemma 2's every other layer, Gemma 3's
// sliding_window_pattern 2) with sliding_window 512 and 16 (-w16); Gemma
// 2 under SDPA with 5.20.0 (the last release with Gemma 2's SDPA path;
// PYTHONPATH: its wheel unpacked), the rest 5.25.0:
//
//	gemma2 sdpa  seq 64: 626,190 -> 642,574 (+16,384); 16: 158,286 -> 160,846 (+2,560); 8: 80,302 both
//	gemma2 eager seq 64: 902,670; 16: 178,254; 8: 86,190, both windows
//	gemma3 sdpa  seq 64: 699,150 -> 715,534 (+16,384); 16: 176,718 -> 179,278 (+2,560); 8: 89,646 both
//	gemma3 eager seq 64: 910,094; 16: 192,590; 8: 94,510, both windows
//
// Their one local layer keeps the bias and k and v of 2 more heads once
// the sequence reaches 16, as Mistral's.
//
// Mistral's difference is 2 layers x ([1, 1, seq, seq] bf16 bias + k and
// v of 2 more heads). Phi-3's fused qkv_proj is sliced: without a mask
// SDPA takes k (rotated, a new tensor) and v (a view of qkv's output,
// whose whole storage it keeps) with their kv heads (enable_gqa); with
// one, repeat_kv's copies of both, so qkv's output is no longer kept:
// per layer + bias + 2 heads of k - (qkv's output - v expanded), which is
// +4,096 at 64 tokens and -512 at 16. (Without nocache the config's
// use_cache makes a DynamicCache whose torch.cat copies k and v: Phi-3's
// unmasked v is then a [1, 2, seq, 16] copy and the window adds +32,768
// at 64 tokens; memsh models use_cache=False, as training scripts set it
// and gradient checkpointing forces it.)
//
// memsh's totals are the harness's for Mistral and Phi-3 (the loss's
// padded labels, core's loss_labels.go, and the rotary cos and sin made
// outside the layers memsh counts, nn.Attention.RopeTables; so is Phi-3's o_proj
// input, a copy of the kernel's output, which follows q's head-major
// layout after the torch.cat that ends Phi-3's rope: nn.Attention.RopeCat,
// TestRopeTablesSavedAsTransformers).
func TestSlidingWindowMask(t *testing.T) {
	saved := func(file, attn, version string, seq int64) int64 {
		if version == "" {
			version = "5.25.0"
		}
		return cpuSaved(t, file, hf.Options{Attn: attn, Transformers: version}, 1, seq)
	}
	for _, tc := range []struct {
		base, file, attn, version string // version "": 5.25.0
		seq                       int64
		more                      int64 // saved bytes over no window, transformers'
	}{
		{"mistral-tiny.json", "mistral-tiny-w512.json", "sdpa", "", 64, 0},
		{"mistral-tiny.json", "mistral-tiny-w16.json", "sdpa", "", 64, 32_768},
		{"mistral-tiny.json", "mistral-tiny-w16.json", "sdpa", "", 16, 5_120},
		{"phi3-tiny.json", "phi3-tiny-w512.json", "sdpa", "", 64, 0},
		{"phi3-tiny.json", "phi3-tiny-w16.json", "sdpa", "", 64, 8_192},
		{"phi3-tiny.json", "phi3-tiny-w16.json", "sdpa", "", 16, -1_024},
		{"phi3-tiny.json", "phi3-tiny-w16.json", "eager", "", 64, 0},
		{"phi3-tiny.json", "phi3-tiny-w16.json", "eager", "", 16, 0},
		{"gemma2-tiny.json", "gemma2-tiny-w16.json", "sdpa", "5.20.0", 64, 16_384},
		{"gemma2-tiny.json", "gemma2-tiny-w16.json", "sdpa", "5.20.0", 16, 2_560},
		{"gemma2-tiny.json", "gemma2-tiny-w16.json", "sdpa", "5.20.0", 8, 0},
		{"gemma2-tiny.json", "gemma2-tiny-w16.json", "eager", "", 64, 0},
		{"gemma2-tiny.json", "gemma2-tiny-w16.json", "eager", "", 16, 0},
		{"gemma3-tiny.json", "gemma3-tiny-w16.json", "sdpa", "", 64, 16_384},
		{"gemma3-tiny.json", "gemma3-tiny-w16.json", "sdpa", "", 16, 2_560},
		{"gemma3-tiny.json", "gemma3-tiny-w16.json", "sdpa", "", 8, 0},
		{"gemma3-tiny.json", "gemma3-tiny-w16.json", "eager", "", 64, 0},
		{"gemma3-tiny.json", "gemma3-tiny-w16.json", "eager", "", 16, 0},
	} {
		if got := saved(tc.file, tc.attn, tc.version, tc.seq) - saved(tc.base, tc.attn, tc.version, tc.seq); got != tc.more {
			t.Errorf("%s, %s, %d tokens: keeps %d bytes more than no window, transformers %d", tc.file, tc.attn, tc.seq, got, tc.more)
		}
	}
	// Phi-3's eager layers, whole: what the harness measures.
	for seq, want := range map[int64]int64{64: 629_004, 16: 120_396} {
		if got := saved("phi3-tiny-w16.json", "eager", "", seq); got != want {
			t.Errorf("phi3-tiny-w16.json, eager, %d tokens: memsh keeps %d bytes, transformers %d", seq, got, want)
		}
	}
	// From 5.21 Gemma 2 has no SDPA path (_supports_sdpa = False: a
	// default load runs eager, an explicit "sdpa" is refused): attn="sdpa"
	// runs eager.
	for _, seq := range []int64{16, 64} {
		if s, e := saved("gemma2-tiny-w16.json", "sdpa", "5.21.0", seq), saved("gemma2-tiny-w16.json", "eager", "5.21.0", seq); s != e {
			t.Errorf("gemma2 under 5.21.0 at %d tokens: sdpa keeps %d bytes, eager %d", seq, s, e)
		}
	}
}

// TestSlidingWindowFlash: transformers passes sliding_window to
// flash-attn (flash_attention_forward's window_size), which computes the
// window only and saves what it saves without one: the window changes
// the kernel's FLOPs alone. At 64 tokens with a window of 16, query i
// reads min(i+1, 16) keys, 904 / 64 = 14.125 on average, where causal
// attention is costed at 64 / 2.
func TestSlidingWindowFlash(t *testing.T) {
	for _, fam := range []string{"mistral", "phi3"} {
		var saved [2]int64
		var keys [2]float64
		for i, file := range []string{fam + "-tiny.json", fam + "-tiny-w16.json"} {
			m, err := hf.FromConfigOptions(readHF(t, file), hf.Options{Attn: "flash"})
			if err != nil {
				t.Fatal(file, err)
			}
			p := tinyPlan(t, m)
			saved[i] = evalPlan(t, p).SavedActivations
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var flops float64
			for _, op := range prog.Ops {
				if op.Kind == "attention" {
					flops += op.Flops
				}
			}
			keys[i] = flops / (2 * 4 * 64 * 4 * 16) // 2 layers x 4 x tokens x heads x head_dim
		}
		if saved[1] != saved[0] {
			t.Errorf("%s flash: a window of 16 keeps %d bytes, none %d: flash-attn saves the same", fam, saved[1], saved[0])
		}
		if keys != [2]float64{32, 14.125} {
			t.Errorf("%s flash: keys per query without and with a window of 16 = %v, want [32 14.125]", fam, keys)
		}
	}
}

// TestSlidingWindowMaskOnce: before 4.53 transformers built one additive
// mask a forward (MistralModel._update_causal_mask, copied into Phi-3's;
// given an attention_mask, causal_mask.clone(): [batch, 1, seq, seq] in
// the model's dtype) and SDPA took it as it was: the layers keep one
// tensor between them. From 4.53 (masking_utils) the mask is boolean and
// SDPA converts it at each call: a bias per layer. Two layers, 2 samples
// of 64 tokens, with an attention_mask of ones and without
// (train(attention_mask=False)), per
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/CONFIG 2 2 64 bfloat16 sdpa nocache [mask]
//
// under 5.25.0 and 4.52.4 (its wheel unpacked on PYTHONPATH, with
// tokenizers 0.21 and huggingface-hub 0.x beside it and the kernels
// package shadowed; torch 2.15.0, CPU):
//
//	mistral 5.25.0 mask: none 832,004, w16 897,540 (+65,536: 2 x (bias 16,384 + k and v of 2 more heads))
//	mistral 5.25.0 none: none 832,004, w16 897,540 (+65,536: the biases are whole, the bool mask not saved)
//	mistral 4.52.4 mask: none 897,540, w16 913,924 (+16,384: one bias; k and v expanded either way, before 4.54)
//	mistral 4.52.4 none: none 897,540, w16 905,860 (+8,320: one (2, 1, 64, 64) view of a [64, 65] bf16 storage)
//	phi3    5.25.0 mask: none 913,924, w16 930,308 (+16,384: 2 x (16,384 + 8,192 + 16,384 - 32,768))
//	phi3    5.25.0 none: none 913,924, w16 930,308 (+16,384, as with one)
//	phi3    4.52.4 mask: none 897,540, w16 913,924 (+16,384: one bias)
//	phi3    4.52.4 none: none 897,540, w16 905,860 (+8,320, as Mistral's)
//
// (4.52.4's _update_causal_mask, without an attention_mask, makes its
// keys past_seen_tokens + sequence_length + 1 long and expands the mask
// over the batch without a copy: nn.Attention.maskExpanded.)
func TestSlidingWindowMaskOnce(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	saved := func(file, version string, mask bool) int64 {
		m, err := hf.FromConfigOptions(readHF(t, file), hf.Options{Attn: "sdpa", Transformers: version})
		if err != nil {
			t.Fatal(file, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq, p.NoAttentionMask = cpu, 2, 64, !mask
		return evalPlan(t, p).SavedActivations
	}
	for _, tc := range []struct {
		fam, version string
		mask         bool
		more         int64
	}{
		{"mistral", "5.25.0", true, 65_536},
		{"mistral", "5.25.0", false, 65_536},
		{"mistral", "4.52.4", true, 16_384},
		{"mistral", "4.52.4", false, 8_320},
		{"phi3", "5.25.0", true, 16_384},
		{"phi3", "5.25.0", false, 16_384},
		{"phi3", "4.52.4", true, 16_384},
		{"phi3", "4.52.4", false, 8_320},
	} {
		if got := saved(tc.fam+"-tiny-w16.json", tc.version, tc.mask) - saved(tc.fam+"-tiny.json", tc.version, tc.mask); got != tc.more {
			t.Errorf("%s under %s, attention_mask %v: a window of 16 keeps %d bytes more, transformers %d", tc.fam, tc.version, tc.mask, got, tc.more)
		}
	}
}

// TestSlidingWindowMaskMadeOnce: transformers makes the mask once a
// forward (MistralModel.forward calls create_sliding_window_causal_mask
// once and hands it to every layer: models/mistral/modeling_mistral.py,
// 5.25.0, line 356), a [batch, 1, seq, seq] boolean that SDPA converts to
// an additive bias in each layer (aten's convert_boolean_attn_mask);
// before 4.53 _update_causal_mask's additive mask in the model's dtype,
// which SDPA takes as it is. memsh lowers one mask for the two layers of
// mistral-tiny-w16.json, and one bias a layer read from it (5.25.0) or
// none (4.52.4), whether the blocks are lowered or copied and under
// checkpointing. The boolean mask is kept by no kernel (TestSlidingWindowMask
// holds the saved bytes): it only lives from the first layer to the last.
func TestSlidingWindowMaskMadeOnce(t *testing.T) {
	for _, tc := range []struct {
		version, ckpt string
		mask          units.DType
		biases        int
	}{
		{"5.25.0", "none", units.BOOL, 2},
		{"5.25.0", "full", units.BOOL, 2},
		{"4.52.4", "none", units.BF16, 0},
		{"4.52.4", "full", units.BF16, 0},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "mistral-tiny-w16.json"), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		if p.Checkpoint, err = core.ParseCheckpoint(tc.ckpt); err != nil {
			t.Fatal(err)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var masks []core.Value
		biases := 0
		for i, v := range prog.Values {
			switch {
			case strings.HasSuffix(v.Name, "self_attn.attention_mask"):
				masks = append(masks, core.Value(i))
				if v.Dtype != tc.mask || !slices.Equal(v.Shape, []int64{1, 1, 64, 64}) {
					t.Errorf("%s, %s: the mask is %v %s, want [1 1 64 64] %s", tc.version, tc.ckpt, v.Shape, v.Dtype.Name(), tc.mask.Name())
				}
			case strings.HasSuffix(v.Name, "self_attn.attn_bias"):
				biases++
				if in := prog.Ops[v.Producer].In; len(masks) != 1 || len(in) != 1 || in[0] != masks[0] {
					t.Errorf("%s, %s: %s is not made from the one mask", tc.version, tc.ckpt, v.Name)
				}
			}
		}
		if len(masks) != 1 || biases != tc.biases {
			t.Errorf("%s, %s: %d masks and %d biases for 2 layers, want 1 and %d", tc.version, tc.ckpt, len(masks), biases, tc.biases)
		}
	}
}

// cpuSaved is what memsh saves for the model of the tiny config.json file
// built with opts, batch samples of seq tokens in bf16 on the CPU
// runtime (the harnesses' setting: tools/oracle/hf_block_saved.py,
// gemma4_saved.py).
func cpuSaved(t *testing.T, file string, opts hf.Options, batch, seq int64) int64 {
	t.Helper()
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(readHF(t, file), opts)
	if err != nil {
		t.Fatal(file, err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = cpu, batch, seq
	return evalPlan(t, p).SavedActivations
}
