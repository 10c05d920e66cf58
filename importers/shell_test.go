package importers

import "testing"

// TestLaunchThroughShell: a launch inside bash -c STRING (sh -c, bash -x
// -c), as NVIDIA's Slurm scripts run the job (srun ... bash -x -c
// "${TRAINING_CMD}": Megatron-LM's examples/megatron_fsdp, d98e8a6), is
// read as the launch it runs: the same plan as the command line given
// directly. bash FILE (a script memsh does not read) is not followed.
func TestLaunchThroughShell(t *testing.T) {
	const flags = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000 --bf16"
	direct, err := Import("run.sh", []byte("torchrun --nproc_per_node 8 pretrain_gpt.py "+flags+"\n"), defaults(Options{GPUs: 8}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, script string }{
		{"srun bash -x -c", "CMD=\"cd /w; export X=1; python /w/pretrain_gpt.py " + flags + "\"\nsrun -l --container-image img bash -x -c \"${CMD}\"\n"},
		{"sh -c", "sh -c 'torchrun --nproc_per_node 8 pretrain_gpt.py " + flags + "'\n"},
		{"bash -c within bash -c", "bash -c \"bash -c 'python pretrain_gpt.py " + flags + "'\"\n"},
	} {
		res, err := Import("run.sh", []byte(tc.script), defaults(Options{GPUs: 8}))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if res.Script != direct.Script {
			t.Errorf("%s: the plan\n%s\nwant the direct launch's\n%s", tc.name, res.Script, direct.Script)
		}
	}
	if _, err := Import("run.sh", []byte("bash train.sh "+flags+"\n"), defaults(Options{GPUs: 8})); err == nil {
		t.Error("bash FILE: a plan, want the script's error (memsh reads no other file)")
	}
}
