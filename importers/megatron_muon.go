package importers

import "strconv"

// megatronOptimizer reads --optimizer as Megatron-LM's arguments.py
// (d98e8a64dd) does: adam (apex's or Transformer Engine's FusedAdam in
// adam_w_mode: AdamW), sgd, and muon, NVIDIA's emerging_optimizers Muon
// with Adam on the parameters that are not its matrices
// (megatron/core/optimizer/emerging_optimizers.py), written as
// muon(...) under precision="megatron" (sim/core/muon_megatron.go).
// `--optimizer dist_muon` (deprecated) is muon with the layer-wise
// distributed optimizer, as --use-distributed-optimizer beside muon is
// (arguments.py l.1725-1736: both set use_layer_wise_distributed_optimizer;
// sim/core/muon_layerwise.go): the plan's distributed_optimizer=True.
func megatronOptimizer(t *tree, p *plan, megatron bool) error {
	opt, err := t.str("optimizer", "adam")
	if err != nil {
		return err
	}
	switch opt {
	case "adam": // apex/TE FusedAdam with adam_w_mode: AdamW
		p.set("optimizer", str("adamw"))
		return nil
	case "sgd":
		p.set("optimizer", str("sgd"))
		return nil
	case "muon":
	case "dist_muon":
		if on, err := t.boolean("use-distributed-optimizer", false); err != nil {
			return err
		} else if !on {
			t.derive("use-distributed-optimizer", true, "optimizer")
		}
	case "lion", "soap", "adaptive_muon":
		return t.errorf("optimizer", "adam, sgd, muon or dist_muon", "optimizer %s (NVIDIA's emerging_optimizers) is not modelled", quoteKey(opt))
	default:
		return t.errorf("optimizer", "adam, sgd, muon or dist_muon", "unknown optimizer %s", quoteKey(opt))
	}
	if !megatron { // fp32 weights: Megatron's FP32Optimizer, not modelled under Muon
		return t.errorf("optimizer", "--bf16 (emerging_optimizers steps Megatron's fp32 main parameters)",
			"%s without --bf16 is not modelled (Megatron refuses it with --fp16)", opt)
	}
	args, err := megatronMuonArgs(t)
	if err != nil {
		return err
	}
	p.set("optimizer", call("muon", args...))
	return megatronMuonLayout(t)
}

// megatronMuonArgs reads the --muon-* flags into muon()'s keywords; those
// that change neither memory nor time are read and named in docs/check.md.
func megatronMuonArgs(t *tree) ([]string, error) {
	var args []string
	if m, err := t.integerOrFloat("muon-momentum"); err != nil {
		return nil, err
	} else if _, given := t.get("muon-momentum"); given {
		if m < 0 || m >= 1 {
			return nil, t.errorf("muon-momentum", "a momentum in [0, 1): 0.9, Megatron's default", "%g is not in [0, 1)", m)
		}
		args = append(args, kw("momentum", strconv.FormatFloat(m, 'g', -1, 64)))
	} else {
		args = append(args, kw("momentum", "0.9")) // arguments.py's --muon-momentum default
	}
	nesterov, err := t.boolean("muon-nesterov", false)
	if err != nil {
		return nil, err
	}
	if !nesterov { // muon()'s default is torch.optim.Muon's, True
		args = append(args, kw("nesterov", "False"))
	}
	steps, err := t.integer("muon-num-ns-steps", 5, 1, 99)
	if err != nil {
		return nil, err
	}
	if steps != 5 {
		args = append(args, kw("ns_steps", strconv.FormatInt(steps, 10)))
	}
	mode, err := t.str("muon-tp-mode", "duplicated")
	if err != nil {
		return nil, err
	}
	switch mode {
	case "duplicated":
	case "blockwise":
		args = append(args, kw("tp_mode", str(mode)))
	case "distributed":
		return nil, t.errorf("muon-tp-mode", "duplicated (the default) or blockwise",
			"distributed (Newton-Schulz distributed over the TP ranks, a Gram all-reduce an iteration) is not modelled")
	default:
		return nil, t.errorf("muon-tp-mode", "duplicated, blockwise or distributed", "unknown mode %s", quoteKey(mode))
	}
	if prec, err := t.str("muon-fp32-matmul-prec", "medium"); err != nil {
		return nil, err
	} else if prec != "medium" {
		return nil, t.errorf("muon-fp32-matmul-prec", "medium (the default: the iterations in bf16)",
			"%s is not modelled: Newton-Schulz runs in fp32 there, not bf16", quoteKey(prec))
	}
	if coeff, err := t.str("muon-coefficient-type", "quintic"); err != nil {
		return nil, err
	} else if coeff == "cubic5" || coeff == "custom" {
		return nil, t.errorf("muon-coefficient-type", "quintic (the default), simple, polar_express, cans, aol or deepseekv4",
			"%s is not modelled: its iterations are not the three-product quintic ones", quoteKey(coeff))
	}
	if s, err := t.str("muon-scalar-optimizer", "adam"); err != nil {
		return nil, err
	} else if s != "adam" {
		return nil, t.errorf("muon-scalar-optimizer", "adam (the default)", "%s for the parameters that are not Muon's is not modelled", quoteKey(s))
	}
	if syrk, err := t.boolean("muon-use-syrk", false); err != nil {
		return nil, err
	} else if syrk {
		t.notModelled = append(t.notModelled, "--muon-use-syrk: the Gram products as emerging_optimizers' Triton SYRK kernel (half the FLOPs); priced as GEMMs")
	}
	if split, err := t.boolean("muon-no-split-qkv", false); err != nil {
		return nil, err
	} else if !split { // store_false: the flag's absence splits
		t.notModelled = append(t.notModelled, "Muon's split of the fused QKV into its Q, K and V blocks (--muon-split-qkv, the default): their fp32 copies at the step's peak where QKV is the largest matrix; memsh orthogonalizes it whole")
	}
	for _, k := range []string{"muon-scale-mode", "muon-extra-scale-factor"} {
		t.get(k) // scalars of the update
	}
	return args, nil
}

// megatronMuonLayout refuses the layer-wise optimizer's legacy path.
func megatronMuonLayout(t *tree) error {
	legacy, err := t.boolean("no-use-layer-wise-param-layout", false)
	if err != nil {
		return err
	}
	distOpt, err := t.boolean("use-distributed-optimizer", false)
	if err != nil {
		return err
	}
	if legacy && distOpt {
		return t.errorf("no-use-layer-wise-param-layout", "drop it: the default layout (each rank's whole Muon matrices in DDP's buffers, the rest in a distributed optimizer) is modelled",
			"the layer-wise optimizer's legacy ping-pong path (every parameter, Adam's too, owned whole by a rank in order of size, the parameters all-gathered by flattening) is not modelled")
	}
	return nil
}
