package importers

import (
	"fmt"
	"slices"
	"strings"
)

// anemoiTrainer reads an anemoi-training Hydra config (the user's file
// over the packaged config groups of anemoi-training 0.5.1 with
// anemoi-models 0.6 to 0.8.1, ecmwf/anemoi-core tag training-0.5.1,
// training/src/anemoi/training/config): the graph, the ensemble
// graph-transformer model, the dataloader's batch, the training's
// precision, rollout and members, and the job's environment
// (ANEMOI_INFERENCE_NUM_CHUNKS*, PYTORCH_CUDA_ALLOC_CONF). docs/anemoi.md
// maps each key. The dataset's and the graph's sizes are not in a config:
// memsh.grid_points, memsh.hidden_nodes and memsh.variables give them.
var anemoiTrainer = &trainer{
	name:  "anemoi",
	about: "an anemoi-training Hydra config (YAML) with memsh.grid_points, memsh.hidden_nodes, memsh.variables: graph, ensemble graph-transformer model, batch, precision, rollout, members, ANEMOI_INFERENCE_NUM_CHUNKS* and PYTORCH_CUDA_ALLOC_CONF from the environment",
	exts:  []string{".yaml", ".yml"},
	parse: parseYAML,
	detect: func(t *tree) bool {
		_, defaults := t.leaves["defaults"]
		_, training := t.leaves["training.ensemble_size_per_device"]
		for k := range t.leaves {
			if strings.HasPrefix(k, "graph.") || strings.HasPrefix(k, "dataloader.") {
				return defaults || training
			}
		}
		return false
	},
	plan: anemoiPlan,
	noEffect: []string{
		"config_validation", "hydra.*", "data.frequency", "data.timestep", "data.resolution", "data.normalizer.*", "data.imputer.*",
		"data.format", "data.processors.*", "model.keep_batch_sharded", "model.output_mask.*", "dataloader.dataset.*", "dataloader.dataset",
		"dataloader.num_workers.*", "dataloader.batch_size.test", "dataloader.training.*", "dataloader.validation.*", "dataloader.test.*",
		"dataloader.prefetch_factor", "dataloader.pin_memory", "dataloader.limit_batches.*", "graph.overwrite",
		"graph.nodes.hidden.node_builder.lam_resolution", "graph.nodes.hidden.node_builder.global_resolution",
		"graph.nodes.hidden.node_builder.margin_radius_km", "graph.nodes.hidden.node_builder.reference_node_name",
		"graph.nodes.hidden.node_builder.mask_attr_name", "graph.attributes.*", "graph.post_processors",
		"training.run_id", "training.fork_run_id", "training.max_epochs", "training.max_steps", "training.lr.*",
		"training.load_weights_only", "training.transfer_learning", "training.deterministic",
		"training.swa.*", "training.metrics", "training.variable_groups.*", "training.validation_metrics.*",
		"training.scalers.*", "training.training_loss.scalers", "training.training_loss.alpha", "training.training_loss.ignore_nans",
		"training.training_loss.loss_weights", "training.loss_gradient_scaling", "training.submodules_to_freeze",
		"training.optimizer.kwargs.*", "diagnostics.*", "hardware.paths.*", "hardware.files.*", "hardware.num_nodes",
		"hardware.accelerator", "hardware.num_gpus_per_node",
	},
}

// anemoiEdgeAttributes are the widths of anemoi-graphs' edge attributes.
var anemoiEdgeAttributes = map[string]int64{"edge_length": 1, "edge_dirs": 2}

// anemoiGroups are the config groups of anemoi-training 0.5.1 the
// importer knows (the defaults list's choices).
var anemoiGroups = map[string][]string{
	"model":    {"graphtransformer_ens"},
	"graph":    {"stretched_grid"}, // multi_scale's encoder is CutOffEdges, which the importer does not read
	"training": {"ensemble"},
}

// anemoiPrecisions maps Lightning's precision to memsh's.
var anemoiPrecisions = map[string]string{"16-mixed": "fp16-mixed", "bf16-mixed": "bf16-mixed", "32": "fp32", "32-true": "fp32"}

func anemoiPlan(t *tree, o Options) (*plan, error) {
	if err := anemoiDefaults(t); err != nil {
		return nil, err
	}
	p := &plan{}
	points, err := t.integer("memsh.grid_points", 0, 1, 1<<34)
	if err != nil {
		return nil, err
	}
	if points == 0 {
		return nil, t.errorf("memsh.grid_points", "the last axis of the dataset's shape (anemoi-datasets inspect DATASET): memsh.grid_points=N on the command line or in the config",
			"missing: the dataset's grid points are not in an anemoi config")
	}
	mesh, err := anemoiMesh(t)
	if err != nil {
		return nil, err
	}
	p.defs = append(p.defs, fmt.Sprintf("data_grid = grid(\"data\", %d)", points), "hidden_mesh = "+mesh)
	if err := anemoiModel(t, o, p); err != nil {
		return nil, err
	}
	return p, anemoiTraining(t, o, p)
}

// anemoiDefaults reads the Hydra defaults list: the config groups chosen
// must be ones whose defaults the importer knows.
func anemoiDefaults(t *tree) error {
	v, _ := t.get("defaults")
	list, _ := v.([]any)
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue // "_self_"
		}
		for g, choice := range m {
			known, ok := anemoiGroups[g]
			if !ok {
				continue // data, dataloader, hardware, ...: their keys are read below
			}
			c, _ := choice.(string)
			if !slices.Contains(known, c) {
				return t.errorf("defaults", fmt.Sprintf("memsh check reads %s: %s", g, strings.Join(known, ", ")),
					"config group %s: %s is not one memsh check models", g, quoteKey(fmt.Sprint(choice)))
			}
		}
	}
	return nil
}

// anemoiMesh is the hidden mesh: TriNodes' icosahedral mesh (exact), or
// the node count given (StretchedTriNodes depends on the dataset's area).
func anemoiMesh(t *tree) (string, error) {
	b, err := t.str("graph.nodes.hidden.node_builder._target_", "anemoi.graphs.nodes.StretchedTriNodes") // stretched_grid.yaml
	if err != nil {
		return "", err
	}
	nodes, err := t.integer("memsh.hidden_nodes", 0, 1, 1<<34)
	if err != nil {
		return "", err
	}
	switch {
	case nodes > 0:
		t.get("graph.nodes.hidden.node_builder.resolution")
		return fmt.Sprintf("mesh(\"hidden\", %d)", nodes), nil
	case b == "anemoi.graphs.nodes.TriNodes":
		r, err := t.integer("graph.nodes.hidden.node_builder.resolution", -1, 0, 12)
		if err != nil {
			return "", err
		}
		if r < 0 {
			return "", t.errorf("graph.nodes.hidden.node_builder.resolution", "TriNodes' refinement level: resolution: 5", "missing")
		}
		return fmt.Sprintf("icosahedral_mesh(\"hidden\", %d)", r), nil
	case b == "anemoi.graphs.nodes.StretchedTriNodes":
		return "", t.errorf("memsh.hidden_nodes", "the hidden nodes your graph has (anemoi-graphs inspect GRAPH): memsh.hidden_nodes=N",
			"missing: a StretchedTriNodes mesh's size depends on the dataset's regional area")
	}
	return "", t.errorf("graph.nodes.hidden.node_builder._target_", "memsh check reads TriNodes and StretchedTriNodes meshes",
		"unknown node builder %s", quoteKey(b))
}

// anemoiTraining sets the step: batch, members, precision, the job's
// allocator and validation pass.
func anemoiTraining(t *tree, o Options, p *plan) error {
	batch, err := t.integer("dataloader.batch_size.training", 2, 1, 1<<20)
	if err != nil {
		return err
	}
	p.set("batch", num(batch))
	if v, err := t.integer("dataloader.batch_size.validation", 4, 1, 1<<20); err != nil {
		return err
	} else if v != batch {
		t.notModelled = append(t.notModelled, fmt.Sprintf("dataloader.batch_size.validation: the validation pass runs at the training batch (%d, not %d)", batch, v))
	}
	members, err := t.integer("training.ensemble_size_per_device", 4, 1, 1<<10)
	if err != nil {
		return err
	}
	prec, err := t.str("training.precision", "16-mixed")
	if err != nil {
		return err
	}
	pr, ok := anemoiPrecisions[prec]
	if !ok {
		return t.errorf("training.precision", "Lightning's 16-mixed, bf16-mixed or 32", "unknown precision %s", quoteKey(prec))
	}
	p.set("precision", str(pr))
	p.set("optimizer", str("adamw"))
	if err := anemoiClip(t, p); err != nil {
		return err
	}
	t.notModelledIf("training.optimizer.zero", "ZeroRedundancyOptimizer's sharding of AdamW's state over the data-parallel ranks")
	if accum, err := t.integer("training.accum_grad_batches", 1, 1, 1<<20); err != nil {
		return err
	} else if accum > 1 {
		p.set("grad_accum", num(accum))
	}
	p.set("gpu", str(o.GPU))
	// The job's PyTorch is not in its config: memsh.runtime names it
	// (train()'s runtime; absent, the newest memsh knows). It changes
	// the CUDA context a card holds (hw.Device.CurrentContext).
	if rt, err := t.str("memsh.runtime", ""); err != nil {
		return err
	} else if rt != "" {
		p.set("runtime", str(rt))
	}
	if err := anemoiLayout(t, o, p, members); err != nil {
		return err
	}
	if sanity, err := t.integer("training.num_sanity_val_steps", 6, -1, 1<<20); err != nil {
		return err
	} else if sanity != 0 && o.GPUs*o.Nodes == 1 {
		p.set("validation", "True")
	} else if sanity != 0 {
		t.notModelled = append(t.notModelled, "training.num_sanity_val_steps: Lightning's sanity check before the first step (memsh replays validation on one GPU only)")
	}
	if strings.Contains(o.Getenv("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") {
		p.set("expandable_segments", "True")
	}
	return nil
}

// anemoiLayout places the members and the model on the job's GPUs as
// anemoi-training's DDPEnsGroupStrategy does: hardware.num_gpus_per_model
// GPUs shard one model (memsh: parallel(cp = G, cp_mode = "ulysses")),
// hardware.num_gpus_per_ensemble GPUs share one ensemble, each model group
// running training.ensemble_size_per_device members, and the GPUs the job
// has (--gpus x --nodes: the allocation decides, as finetune.sbatch's
// hardware overrides say) replicate the ensemble data-parallel.
func anemoiLayout(t *tree, o Options, p *plan, perGroup int64) error {
	gpus := o.GPUs * o.Nodes
	perModel, err := t.integer("hardware.num_gpus_per_model", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	perEnsemble, err := t.integer("hardware.num_gpus_per_ensemble", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	if perEnsemble < perModel || perEnsemble%perModel != 0 {
		return t.errorf("hardware.num_gpus_per_ensemble", "an ensemble is one or more whole model groups: a multiple of hardware.num_gpus_per_model",
			"%d GPUs per ensemble do not divide into model groups of %d", perEnsemble, perModel)
	}
	if gpus%perEnsemble != 0 {
		return t.errorf("hardware.num_gpus_per_ensemble", "say the job's GPUs: --gpus N (per node) and --nodes N",
			"the job's %d GPUs (--gpus x --nodes) do not divide into ensembles of %d", gpus, perEnsemble)
	}
	groups := perEnsemble / perModel                                             // model groups per ensemble
	sequential := strings.TrimSpace(o.Getenv("XBRIS_SEQUENTIAL_MEMBERS")) == "1" // extreme-bris's xbris/patches.py
	switch {
	case groups == 1:
		p.set("members", num(perGroup))
		if sequential {
			p.set("members_mode", str("sequential"))
		}
	case perGroup == 1:
		p.set("members", num(groups))
		p.set("members_mode", str("spread"))
	default:
		return t.errorf("training.ensemble_size_per_device", "memsh spreads one member per model group: set it to 1, or hardware.num_gpus_per_ensemble to hardware.num_gpus_per_model",
			"%d members on each of %d model groups per ensemble is not modelled", perGroup, groups)
	}
	if gpus == 1 {
		return nil
	}
	args := []string{kw("dp", num(gpus/perModel))}
	if perModel > 1 {
		args = append(args, kw("cp", num(perModel)), kw("cp_mode", str("ulysses")))
	}
	p.set("parallel", call("parallel", args...))
	p.cluster(o)
	return nil
}
