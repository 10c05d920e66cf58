package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// What Hy3's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// hy_v3-tiny.json (64 wide, 4 heads of 16, 2 kv heads, q and k normed per
// head; layer 0 dense of 96, then 8 experts of 32, 2 a token, a shared
// expert of 32, the fp32 combine), 2 samples of 32 tokens, at 1, 2 and 3
// layers, the experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hy_v3-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 721,024 (fp32), 362,560 (bf16:
// the routers fp32). enable_moe_fp32_combine false
// (hy_v3-tiny-nocombine.json) keeps the same bytes, bf16 sdpa at 2 and 3
// layers 476,708 and 712,516 (the same command on that file): the fp32
// combine's casts save nothing.
func TestHYV3SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "hy_v3-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{378_116, 749_092, 1_120_068}},
		{"fp32", "eager", [3]int64{426_244, 845_348, 1_264_452}},
		{"bf16", "sdpa", [3]int64{240_900, 476_708, 712_516}},
		{"bf16", "eager", [3]int64{297_220, 589_348, 881_476}},
	})
	for i, want := range []int64{476_708, 712_516} {
		if got := graniteSaved(t, "hy_v3-tiny-nocombine.json", i+2, "bf16", "sdpa", false); got != want {
			t.Errorf("enable_moe_fp32_combine false, bf16 sdpa, %d layers: memsh keeps %d bytes, transformers %d", i+2, got, want)
		}
	}
	for _, tc := range []struct {
		precision string
		want      int64
	}{{"fp32", 721_024}, {"bf16", 362_560}} {
		r := evalPlan(t, hfSavedPlan(t, "hy_v3-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.want || r.States.Grads != tc.want {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d", tc.precision, r.States.Params, r.States.Grads, tc.want)
		}
	}
}

// The same with the experts as transformers' eager loop, sdpa, 2 and 3
// layers (one layer is dense alone: no experts to run):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hy_v3-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj for experts
// e > 0 in each MoE layer, which the harness counts (8 x 64 x 64 + 8 x 64
// x 32 elements; TestFlexOlmoExpertsAsTransformers).
func TestHYV3EagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "hy_v3-tiny.json", 2, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{977_412, 1_576_708}},
		{"bf16", []int64{590_340, 939_780}},
	})
}

// hy_v3 under 5.5.4 is refused (models/hy_v3 came with 5.6); the
// parameter counts of variants of the tiny file are transformers 5.25.0's
// on the meta device (HYV3ForCausalLM built from the edited config):
//
//	file 180,256; attention_bias 180,832; mlp_bias 180,768; head_dim
//	absent 438,976 (128); num_local_experts 6 for num_experts 155,424;
//	num_shared_experts 2 192,544; num_shared_experts 0 204,832 (HYV3MLP's
//	`intermediate_size or config.intermediate_size`: a shared expert of
//	96); mlp_layer_types all "sparse" 217,632; first_k_dense_replace 2
//	180,256 (HYV3Config does not read it)
//
// num_shared_experts null is refused (5.25.0 raises a TypeError); the
// names are transformers'.
func TestHYV3Config(t *testing.T) {
	tiny := string(readHF(t, "hy_v3-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.5.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hy_v3" needs transformers 5.6 or later`) {
		t.Errorf("transformers 5.5.4: error %v, want one naming 5.6", err)
	}
	const end = `"tie_word_embeddings": false`
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 180_256},
		{"attention_bias", end, end + `, "attention_bias": true`, 180_832},
		{"mlp_bias", end, end + `, "mlp_bias": true`, 180_768},
		{"head_dim absent", `"head_dim": 16,`, ``, 438_976},
		{"num_local_experts", `"num_experts": 8`, `"num_local_experts": 6`, 155_424},
		{"num_shared_experts 2", `"num_shared_experts": 1`, `"num_shared_experts": 2`, 192_544},
		{"num_shared_experts 0", `"num_shared_experts": 1`, `"num_shared_experts": 0`, 204_832},
		{"all sparse", end, end + `, "mlp_layer_types": ["sparse", "sparse", "sparse"]`, 217_632},
		{"first_k_dense_replace unread", end, end + `, "first_k_dense_replace": 2`, 180_256},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"num_shared_experts null", `"num_shared_experts": 1`, `"num_shared_experts": null`, "num_shared_experts"},
		{"both expert counts", `"num_experts": 8`, `"num_experts": 8, "num_local_experts": 8`, "num_local_experts"},
		{"a malformed mlp_layer_types", end, end + `, "mlp_layer_types": ["dense", "moe", "sparse"]`, "mlp_layer_types"},
		{"top-k past the experts", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, "num_experts_per_tok"},
	})
	// hy3.json: tencent/Hy3's config.json sizes (80 layers of 4096, 64
	// heads of 128, 8 kv heads, layer 0 dense of 13,312, then 192 experts
	// of 1536, 8 a token, one shared; 120,832 untied embeddings), as a
	// public runtime profile quotes them with the checkpoint's
	// model.safetensors.index.json (huggingface.co/tencent/Hy3 at
	// 716aa724): 295,033,528,320, transformers 5.25.0's count on the meta
	// device (the card's 295B). The index's metadata.total_size,
	// 597,572,342,272 B, is exactly these parameters and the MTP layer it
	// also holds (one MoE layer of 3,719,045,376, eh_proj 4096 x 8192,
	// three norms of 4096) in bf16, with the 80 e_score_correction_bias
	// buffers of 192 in fp32.
	m, err := hf.FromConfig(readHF(t, "hy3.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 295_033_528_320 {
		t.Errorf("Hy3: %d parameters, want 295,033,528,320", got)
	}
	const moeLayer, hidden = 3_719_045_376, 4096
	if got := (m.Params()+moeLayer+2*hidden*hidden+3*hidden)*2 + 80*192*4; got != 597_572_342_272 {
		t.Errorf("Hy3 with its MTP layer in bf16: %d B, want the index's 597,572,342,272", got)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.q_norm.weight",
		"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj",
		"model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.1.post_attention_layernorm.weight", "lm_head.weight")
}

// Under transformers 5.17.0 (the wheel unzipped on PYTHONPATH with
// huggingface_hub 1.x, httpx, httpcore, h11, anyio, sniffio, certifi and
// idna beside it; torch 2.15.0, the CPU, sdpa, loaded by from_pretrained):
//
//	PYTHONPATH=tf5.17.0:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/hy_v3-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 [eagerexperts]
//
// 5.17 keeps e_score_correction_bias alone fp32: in bf16 the router's
// weight is bf16 and F.linear keeps its weight.float() copy (8 x 64 fp32,
// 2,048 B a MoE layer; memsh's SavedWeightCopies), and its one_hot has no
// sentinel class (128 B a MoE layer less than 5.25's in fp32). bf16
// 240,900 / 478,884 / 716,868, fp32 378,116 / 749,220 / 1,120,324;
// param_bytes and grad_bytes at 3 layers 360,512 (bf16), 721,024 (fp32);
// the eager loop, bf16, 2 layers: 592,388, less the harness's 98,304 B of
// expert views.
func TestHYV3Transformers517(t *testing.T) {
	saved := func(layers int, precision, experts string) (int64, *replay.Report) {
		r := evalPlan(t, hfSavedPlan(t, "hy_v3-tiny.json", layers, precision, hf.Options{Attn: "sdpa", Transformers: "5.17.0", Experts: experts}, false))
		return r.SavedActivations + r.SavedWeightCopies, r
	}
	for _, tc := range []struct {
		precision string
		want      [3]int64
		states    int64
	}{
		{"bf16", [3]int64{240_900, 478_884, 716_868}, 360_512},
		{"fp32", [3]int64{378_116, 749_220, 1_120_324}, 721_024},
	} {
		for i, want := range tc.want {
			got, r := saved(i+1, tc.precision, "")
			if got != want {
				t.Errorf("5.17.0 %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
			if i == 2 && (r.States.Params != tc.states || r.States.Grads != tc.states) {
				t.Errorf("5.17.0 %s: parameters %d B, gradients %d B, want %d", tc.precision, r.States.Params, r.States.Grads, tc.states)
			}
		}
	}
	if got, _ := saved(2, "bf16", "eager"); got != 592_388-(8*64*64+8*64*32)*2 {
		t.Errorf("5.17.0 bf16 eager experts, 2 layers: memsh keeps %d bytes, transformers %d less the views", got, 592_388-(8*64*64+8*64*32)*2)
	}
}
