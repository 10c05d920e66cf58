package sim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// torchFlops is one line of testdata/flops_torch.jsonl: PyTorch's own FLOP
// count of one training step of a tiny transformers model
// (tools/oracle/flops.py: FlopCounterMode's formulas, each op given to the
// module that runs it), by phase, module path and aten op.
type torchFlops struct {
	Name, Config, Attn string
	Options            struct {
		Experts    string
		Checkpoint bool
		Lora       []string
		Images     []int64        // count, height, width
		Processor  map[string]any // the image processor's options (hf.Options.Processor)
	}
	Batch, Seq                   int64
	Forward, Backward, Recompute map[string]map[string]float64
	Uncounted                    map[string]int
	Torch, Transformers          string
}

func readTorchFlops(t *testing.T) []torchFlops { return readJSONL[torchFlops](t, "flops_torch.jsonl") }

// flopPhases is FLOPs by phase (0 forward, 1 backward, 2 recompute) and
// module path.
type flopPhases [3]map[string]float64

func newFlopPhases() flopPhases {
	return flopPhases{{}, {}, {}}
}

func torchByModule(c *torchFlops) flopPhases {
	out := newFlopPhases()
	for ph, rows := range []map[string]map[string]float64{c.Forward, c.Backward, c.Recompute} {
		for mod, ops := range rows {
			for _, f := range ops {
				out[ph][mod] += f
			}
		}
	}
	return out
}

// memshPlan is the measured step as a memsh plan: fp32 on the CPU runtime,
// transformers 5.17.0, the case's attention, experts and LoRA.
func memshPlan(t *testing.T, c *torchFlops) *core.Plan {
	t.Helper()
	opts := hf.Options{Attn: c.Attn, Transformers: c.Transformers, Experts: c.Options.Experts}
	if strings.HasPrefix(c.Config, "qwen3-next") {
		opts.LinearAttn = "torch" // no flash-linear-attention on the CPU
	}
	if c.Options.Processor != nil {
		data, err := json.Marshal(c.Options.Processor)
		if err != nil {
			t.Fatal(err)
		}
		opts.Processor = data
	}
	m, err := hf.FromConfigOptions(readHF(t, c.Config), opts)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	p := tinyPlan(t, m)
	p.Seq, p.Batch = c.Seq, c.Batch
	if p.Precision, err = core.LookupPrecision("fp32"); err != nil {
		t.Fatal(err)
	}
	if p.Runtime, err = core.LookupRuntime("cpu"); err != nil {
		t.Fatal(err)
	}
	if c.Options.Checkpoint {
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1} // transformers 5: use_reentrant=False
	}
	if im := c.Options.Images; len(im) == 3 {
		p.Images = core.Images{Count: im[0], Height: im[1], Width: im[2]}
	}
	if len(c.Options.Lora) > 0 {
		var roles []string
		for _, r := range c.Options.Lora {
			roles = append(roles, strings.TrimSuffix(r, "_proj"))
		}
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: roles}
	}
	return p
}

// flopCounted are the op kinds whose FLOPs FlopCounterMode counts:
// matmuls, convolutions and fused attention (torch/utils/flop_counter.py's
// registry). It counts no elementwise op, norm, softmax, scan or loss.
// Beside them, the scan kernels whose work is mostly matmuls (mamba_ssm's
// chunked scan, the chunked delta rule), compared with the matmuls
// FlopCounterMode finds in their torch paths.
var flopCounted = map[string]bool{"matmul": true, "grouped_matmul": true, "attention": true, "conv1d": true,
	"ssd_scan": true, "gated_delta_rule": true}

func memshByModule(t *testing.T, p *core.Plan) (flopPhases, map[string]float64) {
	t.Helper()
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	out, other := newFlopPhases(), map[string]float64{}
	for i := range prog.Ops {
		op := &prog.Ops[i]
		if op.Flops == 0 {
			continue
		}
		if !flopCounted[op.Kind] {
			other[op.Kind] += op.Flops
			continue
		}
		out[0][op.Module] += op.Flops
		out[1][op.Module] += prog.OpModelFlops(i) - op.Flops
		out[2][op.Module] += prog.OpRecomputeFlops(i)
	}
	return out, other
}

var phaseNames = [3]string{"forward", "backward", "recompute"}

// flopRenames turn the model's own module paths into memsh's where memsh's
// reader names a module otherwise: a difference of names, not of FLOPs.
// Mamba-2's out_proj runs inside mamba_ssm's mamba_split_conv1d_scan_combined,
// one op of the mixer in memsh (nn/mamba2.go). PEFT wraps the model in
// base_model.model and each adapted linear's base in base_layer.
var flopRenames = map[string][][2]string{
	"mamba2":     {{".mixer.out_proj", ".mixer"}},
	"llama_lora": {{"base_model.model.", ""}, {".base_layer", ""}, {".lora_A.default", ".lora.lora_A"}, {".lora_B.default", ".lora.lora_B"}},
}

// memshModule folds what memsh names below a module FlopCounterMode sees
// as one: transformers 5's experts are one module (experts) whose loop or
// grouped GEMM memsh lowers per expert (experts.3.up_proj).
func memshModule(name string) string {
	if i := strings.Index(name, ".experts."); i >= 0 {
		return name[:i] + ".experts"
	}
	return name
}

// flopCause explains a module whose FLOPs differ from PyTorch's count:
// memsh's figure from what FlopCounterMode counted there (by aten op), and
// why they differ. A cause that no longer matches fails the test, and so
// does one that explains nothing.
type flopCause struct {
	cases, module string // regular expressions: case names, memsh's module paths
	phase         int    // 0 forward, 1 backward, 2 recompute; -1 every phase
	why           string
	want          func(c *torchFlops, torch map[string]float64) float64
}

func sumOps(ops map[string]float64) float64 {
	var s float64
	for _, f := range ops {
		s += f
	}
	return s
}

// causalSDPA is memsh's causal attention against FlopCounterMode's SDPA.
func causalSDPA(phase int) func(*torchFlops, map[string]float64) float64 {
	return func(_ *torchFlops, ops map[string]float64) float64 {
		if phase == 1 {
			return sumOps(ops) / 2 * 2 / 2.5
		}
		return sumOps(ops) / 2
	}
}

// causalSDPACases are the cases whose text attention is causal SDPA on
// every layer (flopCauses' first and third rows).
const causalSDPACases = "^(llama_sdpa|llama_ckpt|llama_lora|gpt2|mixtral_eager|qwen3_moe_grouped|qwen25_vl|qwen2_vl|idefics3_vision|" +
	"smolvlm_vision|gemma4_vision|mistral3_vision|llava_next_vision|llava_onevision_vision|granite|granite_ckpt|granitemoe_grouped|" +
	"granitemoehybrid|olmoe_grouped|lfm2|lfm2_moe_grouped|lfm2_vl_vision|hunyuan_v1_moe_grouped|minimax_m2_grouped|dots1_grouped|arcee|apertus|hunyuan_v1_dense|" +
	"kimi_linear_grouped|bailing_hybrid_grouped|phi3|glm4|mistral4_grouped|solar_open_grouped)$"

var flopCauses = []flopCause{
	// Before the causal SDPA rows: Kimi Linear's KDA layers are self_attn too.
	{cases: "^(kimi_linear_grouped|bailing_hybrid_grouped)$", module: `^model\.layers\.[01]\.self_attn$`, phase: -1, why: kdaWhy, want: kdaTorchChunk},
	{cases: causalSDPACases, module: `^(model\.(language_model\.|text_model\.)?layers|transformer\.h)\.\d+\.(self_attn|attn)$`, phase: 0,
		why: "causal SDPA: FlopCounterMode counts the full s x s scores whatever is_causal (flop_counter.py: \"We aren't accounting for " +
			"causal attention here\"); memsh counts half, the FlashAttention papers' convention, which the kernel rates memsh prices " +
			"with are measured in (FLOPs / time at the same count); the GPU kernel skips the key blocks above the diagonal and " +
			"computes (n+1)/(2n) of the full with n key blocks of 128",
		want: causalSDPA(0)},
	{cases: "^(llama_ckpt|granite_ckpt)$", module: `\.self_attn$`, phase: 2, why: "causal SDPA, recomputed (as its forward)", want: causalSDPA(2)},
	{cases: "^longcat_flash_grouped$", module: `^model\.layers\.\d+\.self_attn\.[01]$`, phase: 0,
		why:  "LongCat-Flash's two MLAs a layer, causal SDPA (the CPU's flash kernel: v and qk head dims equal): FlopCounterMode counts the full s x s scores, memsh half",
		want: causalSDPA(0)},
	{cases: "^longcat_flash_grouped$", module: `^model\.layers\.\d+\.self_attn\.[01]$`, phase: 1,
		why:  "LongCat-Flash's causal SDPA backward: 2 x its forward in memsh's model FLOPs, 2.5 x in FlopCounterMode's",
		want: causalSDPA(1)},
	{cases: causalSDPACases, module: `^(model\.(language_model\.|text_model\.)?layers|transformer\.h)\.\d+\.(self_attn|attn)$`, phase: 1,
		why: "causal SDPA's backward: half, as the forward, and 2 x its forward where FlopCounterMode counts FlashAttention's five " +
			"backward matmuls (S recomputed: 2.5 x); memsh's model FLOPs (MFU, r.modules) take the usual 2 x (model_flops.go), " +
			"its time prices the kernel's 2.5 x (timing.attnBackwardFLOPs)",
		want: causalSDPA(1)},
	{cases: "^(deepseek_v2|deepseek_v3|kimi_k25_vision)$", module: `^model\.(language_model\.)?layers\.\d+\.self_attn$`, phase: -1,
		why: "MLA's q and v head dims differ (24, 16): the CPU's SDPA takes its math path, two bmm over all s x s scores and 2 x " +
			"backward; memsh prices the GPU's fused kernel, causal half",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) / 2 }},
	{cases: "^(bert|qwen25_vl|qwen2_vl|idefics3_vision|smolvlm_vision|kimi_k25_vision|gemma4_vision|gemma3_vision|mistral3_vision|llava_next_vision|llava_onevision_vision|lfm2_vl_vision)$", module: `^(bert\.encoder\.layer\.\d+\.attention\.self|model\.visual\.blocks\.\d+\.attn|model\.vision_tower\.layers\.\d+\.attn|model\.vision_(tower|model)\.encoder\.layers\.\d+\.self_attn|model\.vision_tower\.transformer\.layers\.\d+\.attention)$`, phase: 1,
		why:  "SDPA's backward (not causal): 2 x its forward in memsh's model FLOPs, 2.5 x in FlopCounterMode's (S recomputed)",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) * 2 / 2.5 }},
	{cases: "^gemma3_vision$", module: `^model\.language_model\.layers\.\d+\.self_attn$`, phase: 1,
		why: "Gemma 3's text layers with images: token_type_ids give SDPA a mask in every layer (each image's tokens see one " +
			"another), whose forward memsh counts over every block as FlopCounterMode does; its backward 2 x the forward in " +
			"memsh's model FLOPs, 2.5 x in FlopCounterMode's",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) * 2 / 2.5 }},
	{cases: "^llama4_vision$", module: `^language_model\.model\.layers\.3\.self_attn$`, phase: 0,
		why:  "Llama 4's NoPE layer (every no_rope_layer_interval-th, 4: layer 3) attends causally: half, as causal SDPA above",
		want: causalSDPA(0)},
	{cases: "^llama4_vision$", module: `^language_model\.model\.layers\.3\.self_attn$`, phase: 1,
		why:  "Llama 4's NoPE layer's backward: causal SDPA's backward above",
		want: causalSDPA(1)},
	{cases: "^llama4_vision$", module: `^(vision_model\.model|language_model\.model)\.layers\.\d+\.self_attn$`, phase: 1,
		why: "SDPA's backward over every key (the vision layers attend to the whole tile; the text model's chunked layers, at a " +
			"sequence past attention_chunk_size, give SDPA a mask and memsh counts every block as FlopCounterMode does): " +
			"2 x its forward in memsh's model FLOPs, 2.5 x in FlopCounterMode's",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) * 2 / 2.5 }},
	{cases: "^(gemma3n|afmoe_grouped)$", module: `^model\.layers\.[13]\.self_attn$`, phase: 0,
		why: "Gemma 3n's full-attention layers (1 and 3 of S F S F), AFMoE's (1 of S F S): causal SDPA, half, as above", want: causalSDPA(0)},
	{cases: "^(gemma3n|afmoe_grouped)$", module: `^model\.layers\.[13]\.self_attn$`, phase: 1,
		why: "Gemma 3n's and AFMoE's full-attention layers' backward: causal SDPA's backward above", want: causalSDPA(1)},
	{cases: "^(gemma3n|afmoe_grouped)$", module: `^model\.layers\.[02]\.self_attn$`, phase: 1,
		why: "Gemma 3n's and AFMoE's sliding layers (window 16 at 64 tokens): SDPA gets the window's mask and memsh counts every block, as " +
			"FlopCounterMode does in the forward; the backward 2 x the forward in memsh's model FLOPs, 2.5 x in FlopCounterMode's",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) * 2 / 2.5 }},
	{cases: "^exaone_moe_grouped$", module: `^model\.layers\.[012]\.self_attn$`, phase: 1,
		why: "K-EXAONE's layers (two sliding, window 16 at 32 tokens, and a global one) each get SDPA a mask, whose forward memsh " +
			"counts over every block as FlopCounterMode does; the backward 2 x the forward in memsh's model FLOPs, 2.5 x in FlopCounterMode's",
		want: func(_ *torchFlops, ops map[string]float64) float64 { return sumOps(ops) * 2 / 2.5 }},
	{cases: "^mamba2$", module: `\.mixer$`, phase: -1, why: mamba2Why, want: mamba2Mixer},
	{cases: "^qwen3_next$", module: `\.linear_attn$`, phase: -1, why: gdnWhy, want: gdnTorchChunk},
	{cases: ".", module: `\.rotary_emb$`, phase: 0,
		why:  "the rotary table's inv_freq x positions outer product (a bmm); memsh counts no FLOPs for making cos and sin",
		want: func(*torchFlops, map[string]float64) float64 { return 0 }},
}

// flopUncounted are the matmul-like aten ops FlopCounterMode has no
// formula for that a case may run (the harness lists every such op it
// meets); each is a cause above.
var flopUncounted = map[string]string{"qwen3_next": "aten.linalg_solve_triangular"}

// TestFLOPsAgainstTorch compares memsh's FLOPs per module, forward,
// backward and recompute (the model FLOPs of r.modules and MFU:
// core.Program.OpModelFlops, OpRecomputeFlops), with PyTorch's own count
// of one training step of the same tiny model (testdata/flops_torch.jsonl,
// made by tools/oracle/flops.py: torch 2.15.0, transformers 5.17.0, peft
// 0.21.2, fp32 on the CPU; the deepseek_v2 line with transformers 5.25.0,
// flops.py --cases deepseek_v2 appended; the qwen2_vl, idefics3_vision and
// smolvlm_vision lines with 5.25.0, flops.py --cases
// qwen2_vl,idefics3_vision,smolvlm_vision appended; the llava_next_vision
// and llava_onevision_vision lines with 5.25.0, flops.py --cases
// llava_next_vision,llava_onevision_vision appended: the unread last CLIP
// layer's forward counted; the deepseek_v4 line with 5.25.0, flops.py
// --cases deepseek_v4 appended; the gemma3n line with 5.25.0, flops.py
// --cases gemma3n appended: AltUp's predict bmm and the clamped
// correction's F.linear run in the decoder layer's forward (methods, not
// the altup module's), its modality_router and prediction_coefs as
// modules, every module equal but the attention's causes; DeepSeek-V4's eager attention over the
// sliding keys and the compressed entries, its grouped o_a_proj, the
// hyper-connections' projections and comb mixing, the compressors and the
// CSA indexer's scorer, no backward for the indexer (no gradient reaches
// it), every module equal; FlopCounterMode's formulas, each op given to
// the module running it; the hunyuan_v1_moe_grouped, minimax_m2_grouped,
// dots1_grouped, arcee and apertus lines with 5.25.0, flops.py --cases
// hunyuan_v1_moe_grouped,minimax_m2_grouped,dots1_grouped,arcee,apertus
// appended: HunYuan's shared_mlp and gate.wg, MiniMax-M2's router, dots1's
// dense first layer and shared experts, Arcee's and Apertus's two-matrix
// MLPs, every module equal but causal SDPA's cause; the hunyuan_v1_dense
// line with 5.25.0, flops.py --cases hunyuan_v1_dense appended, the same;
// the kimi_linear_grouped line with 5.25.0, flops.py --cases
// kimi_linear_grouped appended: Kimi Linear's KDA layers (their
// projections, conv1d and chunk kernel), the NoPE MLA layer and
// DeepSeek-V3's experts, every module equal but the KDA kernel's and
// causal SDPA's causes; the bailing_hybrid_grouped line with 5.25.0,
// flops.py --cases bailing_hybrid_grouped appended: Ling 3's KDA layers
// (full-rank gates, fp32 conv1d), its gated MLA with the rotary
// embedding, the experts, the same;
// the longcat_flash_grouped line with 5.25.0, flops.py --cases
// longcat_flash_grouped appended: LongCat-Flash's two MLAs (LoRA-scaled)
// and MLPs a layer, the router's fp32 GEMM over routed and zero experts,
// the experts over every slot, zero ones included, every module equal but
// causal SDPA's causes; the mistral4_grouped line with 5.25.0, flops.py
// --cases mistral4_grouped appended: Mistral 4's MLA (q and v heads 12
// wide: the CPU's flash kernel), its dense first layer, the router's GEMM
// in the model's dtype, the experts and the shared expert, every module
// equal but causal SDPA's causes; the exaone_moe_grouped line with 5.25.0,
// flops.py --cases exaone_moe_grouped appended: K-EXAONE's q/k-normed
// attention, dense first layer, fp32 router, experts and shared expert,
// every module equal but its masked SDPA backward's cause; the
// solar_open_grouped line with 5.25.0,
// flops.py --cases solar_open_grouped appended: Solar Open's attention
// (heads 24 wide, o_proj from 96), GLM-4.5's fp32 router, experts and
// shared expert in every layer, every module equal but causal SDPA's causes;
// the deberta_v2 line
// with 5.25.0, flops.py --cases deberta_v2 appended: DeBERTa-v3's eager
// disentangled attention (c2p and p2c bmm) and the relative embeddings'
// query and key projections, every module equal; deberta_v2_cls and
// deberta_v2_tok, flops.py --cases deberta_v2_cls,deberta_v2_tok appended:
// the ContextPooler on the first token and the classifiers, every module
// equal; the lfm2_vl_vision line with 5.25.0, flops.py --cases
// lfm2_vl_vision appended: LFM2-VL's patch_embedding, the resized
// position grid's matmul, the SigLIP2 layers over padded patches, the
// projector over every slot, every module equal but SDPA's causes; the
// phi3 and glm4 lines with 5.25.0, flops.py --cases phi3,glm4 appended:
// the one gate_up_proj of Phi-3 and GLM-4, every module equal but causal
// SDPA's cause; the afmoe_grouped line with 5.25.0, flops.py --cases
// afmoe_grouped appended: AFMoE's gate_proj, router.gate, grouped experts,
// shared expert and dense first layer, every module equal but the SDPA
// causes of its sliding and full layers). Only the op kinds FlopCounterMode counts are
// compared (flopCounted); it counts no elementwise op, norm, softmax or
// loss, which memsh does count (a few per cent of a step's FLOPs). Every
// module must match to the FLOP unless flopCauses explains the difference
// with memsh's figure as a function of torch's.
func TestFLOPsAgainstTorch(t *testing.T) {
	used := make([]int, len(flopCauses))
	for _, c := range readTorchFlops(t) {
		for op := range c.Uncounted {
			if flopUncounted[c.Name] != op {
				t.Errorf("%s: FlopCounterMode counted no FLOPs for %s: explain it in flopCauses", c.Name, op)
			}
		}
		p := memshPlan(t, &c)
		mf, _ := memshByModule(t, p)
		for ph, rows := range []map[string]map[string]float64{c.Forward, c.Backward, c.Recompute} {
			torch := map[string]map[string]float64{}
			for mod, ops := range rows {
				for _, r := range flopRenames[c.Name] {
					mod = strings.ReplaceAll(mod, r[0], r[1])
				}
				if torch[mod] == nil {
					torch[mod] = map[string]float64{}
				}
				for op, f := range ops {
					torch[mod][op] += f
				}
			}
			ours := map[string]float64{}
			for mod, f := range mf[ph] {
				if f != 0 {
					ours[memshModule(mod)] += f
				}
			}
			names := map[string]bool{}
			for m := range torch {
				names[m] = true
			}
			for m := range ours {
				names[m] = true
			}
			for m := range names {
				want, why := sumOps(torch[m]), ""
				for k, cause := range flopCauses {
					if (cause.phase == ph || cause.phase < 0) && regexp.MustCompile(cause.cases).MatchString(c.Name) &&
						regexp.MustCompile(cause.module).MatchString(m) {
						want, why = cause.want(&c, torch[m]), cause.why
						used[k]++
						break
					}
				}
				if got := ours[m]; math.Abs(got-want) > 1e-9*math.Max(want, 1) {
					t.Errorf("%s %s %s: memsh %.0f FLOPs, want %.0f (FlopCounterMode %.0f %v)%s", c.Name, phaseNames[ph], m, got, want,
						sumOps(torch[m]), torch[m], map[bool]string{true: "; cause: " + why}[why != ""])
				}
			}
		}
	}
	for k, n := range used {
		if n == 0 {
			t.Errorf("flopCauses[%d] explains no module: %s", k, flopCauses[k].why)
		}
	}
}

// hfInt reads an integer key of the case's config.json.
func hfInt(c *torchFlops, key string) float64 {
	var raw map[string]any
	data, err := os.ReadFile(filepath.Join("testdata", "hf", c.Config))
	if err != nil || json.Unmarshal(data, &raw) != nil {
		return math.NaN()
	}
	f, ok := raw[key].(float64)
	if !ok {
		return math.NaN()
	}
	return f
}

// convPadded is a causal conv1d's FLOPs as memsh counts them from
// FlopCounterMode's: F.conv1d(padding=k-1) computes seq+k-1 outputs a
// sample and the layer keeps the first seq.
func convPadded(c *torchFlops, f float64) float64 {
	k := hfInt(c, "conv_kernel")
	if math.IsNaN(k) {
		k = hfInt(c, "linear_conv_kernel_dim")
	}
	seq := float64(c.Seq)
	return f * seq / (seq + k - 1)
}

const mamba2Why = "Mamba-2's mixer: FlopCounterMode counts its conv1d (with the causal padding's k-1 extra outputs a sample) and " +
	"out_proj, and none of the chunked scan (transformers' torch_forward makes it of elementwise products and sums); memsh's " +
	"fused op counts the conv, out_proj and the scan's matmuls 2T (chunk (G N + H P) + 2 H P N), checked by hand here"

func mamba2Mixer(c *torchFlops, ops map[string]float64) float64 {
	T := float64(c.Batch * c.Seq)
	ch, g, n := hfInt(c, "chunk_size"), hfInt(c, "n_groups"), hfInt(c, "state_size")
	h, p := hfInt(c, "num_heads"), hfInt(c, "head_dim")
	scan := 2 * T * (ch*(g*n+h*p) + 2*h*p*n)
	conv := ops["aten.convolution"] + ops["aten.convolution_backward (harness formula: grad_weight / groups)"]
	if ops["aten.convolution"] == 0 { // the backward: every FLOP of a non-GEMM op counts twice
		scan *= 2
	}
	return ops["aten.mm"] + convPadded(c, conv) + scan
}

const gdnWhy = "Gated DeltaNet's torch path (torch_chunk_gated_delta_rule, transformers 5.17, chunks of 64): FlopCounterMode " +
	"counts the conv1d (padded) and the chunk's bmm, not its two triangular solves (linalg_solve_triangular has no formula), " +
	"which memsh counts as the products they replace (2 c^2 (dk + dv) a chunk and value head); backward, torch computes " +
	"the solves' system gradient by one matmul each (counted), and at this one-chunk length the two state reads of the " +
	"first chunk (a zero state: one gradient, not two) and the last chunk's state update (unused: no backward); memsh " +
	"counts every chunk alike, 2 x forward (fla's kernel, and any length of many chunks)"

const kdaWhy = "Kimi Delta Attention's torch path (chunk_kimi_delta_attention, transformers 5.25, chunks of 64; Kimi Linear and Ling 3): FlopCounterMode " +
	"counts the conv1d (padded) and the chunk's bmm, not the per-channel [chunk, chunk, head_dim] products it sums (elementwise, " +
	"which memsh prices by their bytes); backward, at this one-chunk length the first chunk's two state reads (a zero state: one " +
	"gradient, not two) and the last chunk's state update (unused: no backward); memsh counts every chunk alike, 2 x forward"

func kdaTorchChunk(c *torchFlops, ops map[string]float64) float64 {
	const chunk = 64
	type sizes struct {
		Heads float64 `json:"num_heads"`
		Dim   float64 `json:"head_dim"`
		ConvK float64 `json:"short_conv_kernel_size"`
	}
	var raw struct {
		LA    sizes   `json:"linear_attn_config"` // Kimi Linear's
		Heads float64 `json:"num_attention_heads"`
		sizes         // Ling 3's, at the top level (its heads num_attention_heads)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "hf", c.Config))
	if err != nil || json.Unmarshal(data, &raw) != nil {
		return math.NaN()
	}
	if raw.LA.Heads == 0 {
		raw.LA = sizes{raw.Heads, raw.Dim, raw.ConvK}
	}
	seq := float64(c.Seq)
	padded := func(f float64) float64 { return f * seq / (seq + raw.LA.ConvK - 1) }
	if fwd := ops["aten.convolution"]; fwd != 0 {
		return padded(fwd) + ops["aten.bmm"]
	}
	edges := float64(c.Batch) * raw.LA.Heads * 4 * 2 * chunk * raw.LA.Dim * raw.LA.Dim
	return padded(ops["aten.convolution_backward (harness formula: grad_weight / groups)"]) + ops["aten.bmm"] + edges
}

func gdnTorchChunk(c *torchFlops, ops map[string]float64) float64 {
	const chunk = 64
	hv, dk, dv := hfInt(c, "linear_num_value_heads"), hfInt(c, "linear_key_head_dim"), hfInt(c, "linear_value_head_dim")
	chunks := math.Ceil(float64(c.Seq) / chunk)
	heads := float64(c.Batch) * hv
	solves := heads * chunks * 2 * chunk * chunk * (dk + dv)
	if fwd := ops["aten.convolution"]; fwd != 0 {
		return convPadded(c, fwd) + ops["aten.bmm"] + solves
	}
	edges := heads * 4 * 2 * chunk * dk * dv // one gradient missing from each first-chunk read, two from the last update
	return convPadded(c, ops["aten.convolution_backward (harness formula: grad_weight / groups)"]) + ops["aten.bmm"] + solves + edges
}

// TestRecomputeEarlyStop checks where a checkpointed Llama layer's
// recompute stops running kernels (core.Program.RecomputeEnd): before
// down_proj's GEMM under torch.utils.checkpoint's early stop (its input is
// the region's last saved tensor, packed before the kernel runs, as
// TestFLOPsAgainstTorch's llama_ckpt case measured), at the region's end
// when it is reentrant, when early_stop=False, and under Megatron's own
// recompute.
func TestRecomputeEarlyStop(t *testing.T) {
	for _, tc := range []struct {
		name, prec        string
		reentrant, noStop bool
		stop              string // the first op not run again; "" = the region's end
	}{
		{"non-reentrant", "fp32", false, false, "model.layers.0.mlp.down_proj"},
		{"reentrant", "fp32", true, false, ""},
		{"early_stop=False", "fp32", false, true, ""},
		{"megatron", "megatron", false, false, ""},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		if p.Precision, err = core.LookupPrecision(tc.prec); err != nil {
			t.Fatal(err)
		}
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1, Reentrant: tc.reentrant, NoEarlyStop: tc.noStop}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		reg := prog.Regions[0]
		end := prog.RecomputeEnd(1)
		got := ""
		if end < reg.End {
			got = prog.Ops[end].Name
		}
		if got != tc.stop {
			t.Errorf("%s: the recompute stops at op %d %q of [%d, %d), want %q", tc.name, end, got, reg.First, reg.End, tc.stop)
		}
	}
}
