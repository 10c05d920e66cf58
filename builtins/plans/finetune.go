package plans

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/litgpt"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Offload is the Starlark value of offload(...) (type "offload"): where
// optimizer state, parameters and activations live when not on the GPU.
type Offload struct{ o *core.Offload }

var _ starlark.HasAttrs = Offload{}

// SimOffload is the wrapped configuration.
func (x Offload) SimOffload() *core.Offload { return x.o }

func (x Offload) Type() string          { return "offload" }
func (x Offload) Freeze()               {}
func (x Offload) Truth() starlark.Bool  { return starlark.True }
func (x Offload) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

// CompareSameType: two offload settings are equal when every tier is.
func (x Offload) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return compareEqual(op, *x.o == *y.(Offload).o, "offload settings")
}

func (x Offload) String() string {
	var parts []string
	for _, f := range []struct{ k, v string }{{"optimizer", x.o.Optimizer}, {"params", x.o.Params}, {"activations", x.o.Activations}} {
		if f.v != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", f.k, f.v))
		}
	}
	if x.o.SyncCopies {
		parts = append(parts, "streams=False")
	}
	return "offload(" + strings.Join(parts, ", ") + ")"
}

var offloadAttrNames = []string{"activations", "optimizer", "params", "streams"}

func (x Offload) AttrNames() []string { return offloadAttrNames }

func (x Offload) Attr(name string) (starlark.Value, error) {
	var s string
	switch name {
	case "optimizer":
		s = x.o.Optimizer
	case "params":
		s = x.o.Params
	case "activations":
		s = x.o.Activations
	case "streams":
		return starlark.Bool(!x.o.SyncCopies), nil
	default:
		return nil, nil
	}
	if s == "" {
		return starlark.None, nil
	}
	return starlark.String(s), nil
}

func FinetuneBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "offload",
		Sig:  "offload(optimizer=None, params=None, activations=None, streams=True)",
		Doc: "Where model states and activations live off the GPU, for train(..., offload=offload(...)). " +
			"optimizer \"cpu\" (ZeRO-Offload, with parallel(zero=1, 2 or 3) and adamw(), adam() or lion(): DeepSpeed steps its CPU Adam or Lion and refuses another client optimizer; on one GPU parallel(zero=2): DeepSpeed offloads through its ZeRO optimizer only, " +
			"so memsh refuses it without zero=) or \"nvme\" (ZeRO-Infinity's NVMe tier, which DeepSpeed runs with parallel(zero=3) only: " +
			"master, moments and fp32 grads in files on NVMe, swapped through pinned host buffers at each step); params \"cpu\" (ZeRO-3's offload_param with parallel(zero=3), on one GPU " +
			"parallel(dp=1, zero=3), FSDP2's CPUOffloadPolicy with parallel(fsdp=True), or FSDP1's CPUOffload(offload_params=True) " +
			"with parallel(fsdp=1): DeepSpeed offloads parameters " +
			"with ZeRO stage 3 only, so memsh refuses params= without zero=3 or fsdp=; " +
			"with zero=3 it moves the 16-bit partitions only, as DeepSpeed's offload_param alone does: master, moments and gradient partition stay on the GPU, " +
			"the step runs there and copies the updated partition to the host (optimizer=\"cpu\" moves the optimizer too); with FSDP the optimizer goes with the params; " +
			"\"nvme\" with zero=3 keeps the sub-groups that fit in DeepSpeed's max_in_cpu (1e9 elements) pinned on the host, the rest on NVMe, " +
			"read before each all-gather); activations \"cpu\" (save_on_cpu: saved tensors go " +
			"to pinned host memory after their forward use and come back for backward; torchtune's OffloadActivations, which " +
			"leaves what the output projection and the loss save on the GPU; its copies run on a side stream and overlap the compute, " +
			"streams=False is its use_streams=False: the copies run on the compute stream and every one is exposed). " +
			"Each activation copy is a pinned block rounded up to a power of two, as PyTorch's CachingHostAllocator gives it. The report gives " +
			"r.host_memory (per GPU; r.notes says what it holds and how much is pinned) and r.traffic[\"pcie\"], r.traffic[\"nvme\"] per step (r.notes says what lives on NVMe); " +
			"train(..., host_memory=N) checks a node's RAM. With parallel(dp=..., zero=1, 2 or 3), optimizer=\"cpu\" is " +
			"DeepSpeed's ZeRO-Offload on every rank: each rank's partition of master, moments and fp32 grads on the host; " +
			"with zero=3, params=\"cpu\" also keeps the bf16 partitions in pinned host memory (copied to the GPU before " +
			"each all-gather). With parallel(fsdp=True), params=\"cpu\" is FSDP2's CPUOffloadPolicy: shards, their gradients " +
			"and the optimizer on the host (each parameter's shard and gradient shard pinned, a block rounded up to a power of two), each unit's shards copied to the GPU before its all-gather, and torch's optimizer " +
			"stepping the shards on the CPU (cpu_optimizer in r.time_breakdown: AdamW's for-loop, 80 bytes per fp32 element; " +
			"adamw(impl=\"fused\") one pass, 28). With parallel(fsdp=1) it is FSDP1's CPUOffload(offload_params=True) (HF accelerate's " +
			"fsdp_offload_params, fsdp_qlora's --use_cpu_offload): each unit's flat shard and a gradient shard of the same size " +
			"(_cpu_grad, for frozen units too) pinned on the host, each a block rounded up to a power of two; the shard copied " +
			"to the GPU before each all-gather; the gradient shard kept on the GPU after its reduce-scatter until the backward " +
			"ends (FSDP1 frees it there, FSDP2 at once) and copied to the host; torch's optimizer steps on the CPU as for FSDP2. " +
			"FSDP has no optimizer-only offload (optimizer= alone is refused) and no NVMe tier.",
		Fn: offloadFn,
	}, {
		Name: "litgpt",
		Sig:  "litgpt(name, adapter=None)",
		Doc: "A LitGPT model (Lightning-AI/lit-gpt at 8641822) as its finetune scripts run it: fused qkv with " +
			"LitGPT's LoRA, RMSNorm in the input dtype, lm_head per 128 tokens with fp32 logits and chunked " +
			"cross-entropy. name: phi-1_5, stablelm-base-alpha-3b, Llama-2-7b-hf, Llama-2-13b-hf, falcon-40b. " +
			"adapter \"v1\" or \"v2\" builds adapter.py / adapter_v2.py (train it with freeze=[\"all\"]). " +
			"Reproduces the LitGPT resource tables with precision=\"bf16\" and runtime=\"cuda-2.1\"; quantized runs " +
			"add quant_lm_head=True, quant_from=fp16 (Lightning's BitsandbytesPrecision).",
		Fn: litgptFn,
	}}
}

func offloadFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var opt, params, acts starlark.Value = starlark.None, starlark.None, starlark.None
	streams := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "optimizer?", &opt, "params?", &params, "activations?", &acts, "streams?", &streams); err != nil {
		return nil, err
	}
	o := &core.Offload{SyncCopies: !streams}
	for _, f := range []struct {
		what string
		v    starlark.Value
		dst  *string
	}{{"optimizer", opt, &o.Optimizer}, {"params", params, &o.Params}, {"activations", acts, &o.Activations}} {
		switch s := f.v.(type) {
		case starlark.NoneType:
		case starlark.String:
			*f.dst = string(s)
		default:
			return nil, fmt.Errorf("offload: %s must be None or a tier name (got %s)", f.what, f.v.Type())
		}
	}
	if err := o.Validate(); err != nil {
		known := []string{"cpu", "nvme"}
		for _, s := range []string{o.Optimizer, o.Params, o.Activations} {
			if h := host.DidYouMean(s, known); h != "" {
				return nil, host.WithHint(err, h)
			}
		}
		return nil, err
	}
	return Offload{o}, nil
}

func litgptFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var adapter starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "adapter?", &adapter); err != nil {
		return nil, err
	}
	c, err := litgpt.Lookup(name)
	if err != nil {
		var known []string
		for _, k := range litgpt.Configs() {
			known = append(known, k.Name)
		}
		return nil, host.WithHint(err, host.DidYouMean(name, known))
	}
	switch a := adapter.(type) {
	case starlark.NoneType:
	case starlark.String:
		c.Adapter = string(a)
	default:
		return nil, fmt.Errorf("litgpt: adapter must be None, \"v1\" or \"v2\" (got %s)", adapter.Type())
	}
	m, err := litgpt.New(c)
	if err != nil {
		return nil, err
	}
	return models.NewModel(m, nil, host.CallerPos(thread)), nil
}
