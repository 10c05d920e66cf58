package importers

import (
	"fmt"
	"path"
	"strings"
)

// The processes of an ms-swift job: its launcher's variables, or the
// launcher of its entry point's file.

// swiftWorld is the job's processes from the variables ms-swift's
// launcher reads (swift/cli/main.py): with NPROC_PER_NODE or NNODES it
// runs torchrun with them (NPROC_PER_NODE processes a node), without
// either one Python process, which spreads the model over every GPU it
// sees (device_map, naive model parallelism) when it sees several. The
// count is that of the script; --gpus and --nodes, when given, must agree.
// Megatron-SWIFT (megatron) runs one process a GPU whatever each sees
// (Megatron's local rank): one process without either variable, and no
// device_map.
func swiftWorld(t *tree, o Options, megatron bool) (Options, int64, error) {
	nprocKey, nnodesKey := "env.NPROC_PER_NODE", "env.NNODES"
	runner, _ := t.str(swiftRunnerKey, "")
	switch runner {
	case "torchrun": // its own flags; one process on one node unless they say
		nprocKey, nnodesKey = "launcher.nproc_per_node", "launcher.nnodes"
		swiftDefault(t, nprocKey, int64(1))
		for _, k := range []string{"env.NPROC_PER_NODE", "env.NNODES"} {
			t.get(k) // torchrun's flags, not ms-swift's launcher, start the processes
		}
	case swiftConfigRunner: // a config file on its own: its ENV, else --gpus and --nodes
		swiftDefault(t, nprocKey, o.GPUs)
		if o.Nodes > 1 {
			swiftDefault(t, nnodesKey, o.Nodes)
		}
	case "python": // one process, as ms-swift's launcher without NPROC_PER_NODE
		nprocKey, nnodesKey = swiftRunnerKey+".nproc", swiftRunnerKey+".nnodes" // never set
	}
	nproc, err := t.integer(nprocKey, 0, 1, 1<<16)
	if err != nil {
		return o, 0, err
	}
	nnodes, err := t.integer(nnodesKey, 0, 1, 1<<16)
	if err != nil {
		return o, 0, err
	}
	single := envOf(t, "SWIFT_SINGLE_DEVICE_MODE") == "1" // each process on one device whatever it sees
	visible := int64(0)
	if v := envOf(t, "CUDA_VISIBLE_DEVICES"); v != "" {
		visible = int64(len(strings.Split(v, ",")))
	}
	switch {
	case nproc == 0 && nnodes == 0:
		gpus := o.GPUs
		if visible > 0 {
			gpus = visible
		}
		if megatron && o.GPUs > 1 {
			return o, 0, t.errorf("env.NPROC_PER_NODE", fmt.Sprintf("NPROC_PER_NODE=%d runs a process a GPU", o.GPUs),
				"unset: ms-swift runs Megatron-SWIFT as one process on one GPU, where --gpus says %d", o.GPUs)
		}
		if gpus > 1 && !single && !megatron {
			key, what := "env.NPROC_PER_NODE", "unset: ms-swift then runs"
			if runner == "python" {
				key, what = swiftRunnerKey, "python: ms-swift runs"
			}
			return o, 0, t.errorf(key, fmt.Sprintf("NPROC_PER_NODE=%d runs one process a GPU (DDP, DeepSpeed); memsh replays that, not device_map's layers spread over GPUs", gpus),
				"%s one process over the %d GPUs it sees, the model's layers spread over them (device_map), which memsh does not model", what, gpus)
		}
		o.GPUs, o.Nodes = 1, 1
		return o, 1, nil
	case nproc == 0: // torchrun's default: one process a node
		nproc = 1
	case nnodes == 0:
		nnodes = 1
	}
	if visible > 0 && visible < nproc {
		return o, 0, t.errorf(nprocKey, "list a GPU for each process in CUDA_VISIBLE_DEVICES", "%d processes a node see %d GPUs", nproc, visible)
	}
	// is_mp (swift/utils/env.py at v4.5.2): a process a node seeing two
	// GPUs or more spreads its model over them (device_map, "MP + DDP"),
	// unless SWIFT_SINGLE_DEVICE_MODE=1; the GPUs must divide evenly
	if visible > 0 && !single && !megatron {
		if visible%nproc != 0 {
			return o, 0, t.errorf(nprocKey, "list as many GPUs in CUDA_VISIBLE_DEVICES as processes", "%d GPUs seen do not divide among %d processes a node (ms-swift asserts n_gpu %% local_world_size == 0)", visible, nproc)
		}
		if visible/nproc >= 2 {
			return o, 0, t.errorf(nprocKey, fmt.Sprintf("NPROC_PER_NODE=%d runs one process a GPU; memsh replays that, not device_map's layers spread over a process's GPUs", visible),
				"%d processes a node over %d GPUs: ms-swift spreads each process's model over %d of them (device_map with DDP), which memsh does not model", nproc, visible, visible/nproc)
		}
	}
	if o.GPUs != 1 && o.GPUs != nproc {
		return o, 0, t.errorf(nprocKey, "leave --gpus out, or give the script's count", "%d processes a node, where --gpus says %d", nproc, o.GPUs)
	}
	if o.Nodes != 1 && o.Nodes != nnodes {
		return o, 0, t.errorf(nnodesKey, "leave --nodes out, or give the script's count", "%d nodes, where --nodes says %d", nnodes, o.Nodes)
	}
	o.GPUs, o.Nodes = nproc, nnodes
	return o, nproc * nnodes, nil
}

// swiftRunnerKey holds the program that runs ms-swift's entry point's
// file (torchrun, python), absent for ms-swift's own launcher.
const swiftRunnerKey = "launcher.runner"

// swiftRunner reads the launcher of ms-swift's entry point's file:
// torchrun (or python -m torch.distributed.run) with its
// --nproc_per_node and --nnodes under launcher.*, or python (one
// process); another (accelerate launch, deepspeed) is refused.
func swiftRunner(t *tree, runner []string, line int) error {
	if len(runner) == 0 {
		return nil
	}
	prog := path.Base(runner[0])
	rest := runner[1:]
	if strings.HasPrefix(prog, "python") {
		if len(rest) >= 2 && rest[0] == "-m" && rest[1] == "torch.distributed.run" {
			prog, rest = "torchrun", rest[2:]
		} else {
			t.leaves[swiftRunnerKey] = leaf{value: "python", line: line}
			return nil
		}
	}
	if prog != "torchrun" {
		return &Error{File: t.file, Line: line, Msg: fmt.Sprintf("ms-swift's entry point run by %s, which memsh does not read", prog),
			Hint: "run it with ms-swift's own launcher (NPROC_PER_NODE=8 swift sft ...) or torchrun --nproc_per_node 8 swift/cli/sft.py ..."}
	}
	t.leaves[swiftRunnerKey] = leaf{value: "torchrun", line: line}
	for i := 0; i < len(rest); i++ {
		name, ok := strings.CutPrefix(rest[i], "--")
		if !ok {
			continue
		}
		name, v, inline := strings.Cut(name, "=")
		if !inline && i+1 < len(rest) {
			i++
			v = rest[i]
		}
		name = strings.ReplaceAll(name, "-", "_")
		t.leaves["launcher."+name] = leaf{value: swiftScalar(v), line: line}
	}
	return nil
}
