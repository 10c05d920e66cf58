package importers

import "testing"

// launchFlags are a tiny GPT's pretrain_gpt.py flags for the launch tests.
const launchFlags = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000 --bf16"

// launchCase is a job script that launches pretrain_gpt.py with launchFlags.
type launchCase struct{ name, script string }

// sameAsDirect checks that each script imports to the plan of the launch
// given directly on the command line.
func sameAsDirect(t *testing.T, cases []launchCase) {
	t.Helper()
	direct, err := Import("run.sh", []byte("torchrun --nproc_per_node 8 pretrain_gpt.py "+launchFlags+"\n"), defaults(Options{GPUs: 8}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		res, err := Import("run.sh", []byte(tc.script), defaults(Options{GPUs: 8}))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if res.Script != direct.Script {
			t.Errorf("%s: the plan\n%s\nwant the direct launch's\n%s", tc.name, res.Script, direct.Script)
		}
	}
}

// TestLaunchThroughShell: a launch inside bash -c STRING (sh -c, bash -x
// -c), as NVIDIA's Slurm scripts run the job (srun ... bash -x -c
// "${TRAINING_CMD}": Megatron-LM's examples/megatron_fsdp, d98e8a6), is
// read as the launch it runs: the same plan as the command line given
// directly. bash FILE (a script memsh does not read) is not followed.
func TestLaunchThroughShell(t *testing.T) {
	sameAsDirect(t, []launchCase{
		{"srun bash -x -c", "CMD=\"cd /w; export X=1; python /w/pretrain_gpt.py " + launchFlags + "\"\nsrun -l --container-image img bash -x -c \"${CMD}\"\n"},
		{"sh -c", "sh -c 'torchrun --nproc_per_node 8 pretrain_gpt.py " + launchFlags + "'\n"},
		{"bash -c within bash -c", "bash -c \"bash -c 'python pretrain_gpt.py " + launchFlags + "'\"\n"},
	})
	if _, err := Import("run.sh", []byte("bash train.sh "+launchFlags+"\n"), defaults(Options{GPUs: 8})); err == nil {
		t.Error("bash FILE: a plan, want the script's error (memsh reads no other file)")
	}
}

// TestLaunchThroughHeredoc: a job script handed to sbatch (or bash, sh)
// on its standard input as a heredoc (sbatch <<EOF ... EOF, the usual way
// to submit a job from a driver script) is read as the script sbatch
// runs: the same plan as the command line given directly. Unquoted, the
// outer shell expands the heredoc first ($FLAGS); quoted ('EOF'), the
// job's shell does, with the variables the outer script exported.
func TestLaunchThroughHeredoc(t *testing.T) {
	sameAsDirect(t, []launchCase{
		{"sbatch <<EOF", "sbatch --nodes=1 <<EOF\n#!/bin/bash\n#SBATCH --gpus-per-node=8\ntorchrun --nproc_per_node 8 pretrain_gpt.py " + launchFlags + "\nEOF\n"},
		{"sbatch -N 1 <<EOF, outer variable", "FLAGS=\"" + launchFlags + "\"\nsbatch -N 1 -J x <<EOF\n#!/bin/bash\nsrun torchrun --nproc_per_node 8 pretrain_gpt.py $FLAGS\nEOF\n"},
		{"sbatch <<'EOF', exported variable", "export FLAGS=\"" + launchFlags + "\"\nsbatch <<'EOF'\n#!/bin/bash\nN=8\ntorchrun --nproc_per_node $N pretrain_gpt.py $FLAGS\nEOF\n"},
		{"sbatch <<-EOF", "if true; then\n\tsbatch <<-EOF\n\t#!/bin/bash\n\ttorchrun --nproc_per_node 8 pretrain_gpt.py " + launchFlags + "\n\tEOF\nfi\n"},
		{"bash <<EOF", "bash -s <<EOF\ntorchrun --nproc_per_node 8 pretrain_gpt.py " + launchFlags + "\nEOF\n"},
	})
	// A job script file given to sbatch is not read (memsh reads no other
	// file), heredoc or not: bash reads the file, not its standard input.
	for _, script := range []string{
		"sbatch job.sh <<EOF\ntorchrun pretrain_gpt.py " + launchFlags + "\nEOF\n",
		"bash train.sh <<EOF\ntorchrun pretrain_gpt.py " + launchFlags + "\nEOF\n",
		"cat <<EOF\ntorchrun pretrain_gpt.py " + launchFlags + "\nEOF\n",
	} {
		if _, err := Import("run.sh", []byte(script), defaults(Options{GPUs: 8})); err == nil {
			t.Errorf("%q: a plan, want the script's error (the heredoc is no job script)", script)
		}
	}
}
