"""Record one training step of a real CUDA run as a PyTorch memory snapshot, for `memsh compare`.

Two lines in a training loop (the recorder skips the first steps, which allocate the optimizer state and
warm the caching allocator, records step `step`, writes the snapshot when step `step` + 1 begins, and stops):

    from record_snapshot import StepRecorder                  # this file, beside your script
    rec = StepRecorder("step.pickle", step=3)                 # before the loop
    for batch in loader:
        rec.step()                                            # first thing in each step
        ...

Then, with a memsh script describing the same model and plan:

    memsh compare step.pickle plan.star

Hugging Face Trainer: `trainer.add_callback(hf_callback("step.pickle", step=3))` before `trainer.train()`.
torchtune: copy the recipe (`tune cp full_finetune_single_device .`), add the two lines around its
`for idx, batch in enumerate(self._dataloader):` loop. torchtitan needs no recorder: run with
`--profiling.enable_memory_snapshot --profiling.save_memory_snapshot_folder memory_snapshot`; its snapshot
holds every step up to the dump (peaks compare; per-module bytes add up over those steps).

The snapshot is what torch.cuda.memory._dump_snapshot writes (it also opens in pytorch.org/memory_viz):
each allocation with its Python stack. Only rank 0 records under torch.distributed unless rank= is given.
"""
import os

import torch


class StepRecorder:
    def __init__(self, path, step=3, rank=0, max_entries=1_000_000):
        self.path, self.target, self.max_entries = path, step, max_entries
        self.calls, self.recording, self.done = 0, False, False
        self.enabled = torch.cuda.is_available() and _rank() == rank
        if not torch.cuda.is_available():
            print("record_snapshot: CUDA is not available; nothing will be recorded")

    def step(self):
        """Call at the start of every training step."""
        if not self.enabled or self.done:
            return
        self.calls += 1
        if self.calls == self.target:
            torch.cuda.synchronize()
            torch.cuda.memory._record_memory_history(max_entries=self.max_entries)
            self.recording = True
        elif self.recording:
            self.close()

    def close(self):
        """Writes the snapshot, if recording (at the next step, or call it after the loop)."""
        if not self.recording:
            return
        torch.cuda.synchronize()
        tmp = self.path + ".tmp"
        torch.cuda.memory._dump_snapshot(tmp)
        os.replace(tmp, self.path)
        torch.cuda.memory._record_memory_history(enabled=None)
        self.recording, self.done = False, True
        print(f"record_snapshot: step {self.target} written to {self.path}")


def _rank():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def hf_callback(path, step=3, rank=0):
    """A transformers TrainerCallback recording training step `step` to path."""
    from transformers import TrainerCallback

    class SnapshotCallback(TrainerCallback):
        def __init__(self):
            self.rec = StepRecorder(path, step=step, rank=rank)

        def on_step_begin(self, args, state, control, **kwargs):
            self.rec.step()

        def on_train_end(self, args, state, control, **kwargs):
            self.rec.close()

    return SnapshotCallback()
