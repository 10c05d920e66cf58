# A torchtitan_recipes-style module written for memsh's tests: full
# configurations derived from a base in the same file, as
# torchtitan/config/README.md (b5bcd76c6) says users write their own.

"""Llama 3 runs for memsh's importer tests."""

from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.optimizer import default_adamw
from torchtitan.components.quantization import Float8LinearConverter
from torchtitan.config import (
    CompileConfig,
    ParallelismConfig,
    TrainingConfig,
)
from torchtitan.distributed.activation_checkpoint import (
    FullAC,
    MemoryBudgetAC,
    SelectiveAC,
)
from torchtitan.models.common.config_utils import decoder_vocab_size
from torchtitan.models.llama3 import model_registry
from torchtitan.trainer import Trainer

_SEQ = 8192


def _base(flavor: str, tp: int = 1) -> Trainer.Config:
    model_spec = model_registry(flavor, attn_backend="flex")
    return Trainer.Config(
        loss=CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec)),
        model_spec=model_spec,
        optimizer=default_adamw(lr=3e-4),
        training=TrainingConfig(
            num_tokens_per_microbatch_per_dp_rank=2 * _SEQ,
            max_context_length=_SEQ,
        ),
        parallelism=ParallelismConfig(tensor_parallel_degree=tp),
        activation_checkpoint=SelectiveAC.Config(),
    )


def llama3_8b_fsdp_accum() -> Trainer.Config:
    config = _base("8B")
    config.training.num_tokens_per_train_step = 4 * 2 * _SEQ * 16
    config.training.disable_cuda_graphs = True
    config.activation_checkpoint = FullAC.Config()
    return config


def llama3_8b_float8_compiled() -> Trainer.Config:
    config = _base("8B")
    config.compile = CompileConfig(enable=True, components=["model"])
    model_compile_enabled = config.compile.enable and "model" in config.compile.components
    config.model_spec = model_registry(
        "8B",
        attn_backend="flex",
        converters=[
            Float8LinearConverter.Config(
                filter_fqns=["lm_head", "auto_filter_small_kn"],
                model_compile_enabled=model_compile_enabled,
            ),
        ],
    )
    config.training.disable_cuda_graphs = True
    return config


def llama3_70b_tp_pp() -> Trainer.Config:
    config = _base("70B", tp=8)
    config.parallelism.pipeline_parallel_degree = 2
    config.parallelism.pipeline_parallel_schedule = "Interleaved1F1B"
    config.parallelism.num_pp_microbatches = 8
    config.training.num_tokens_per_microbatch_per_dp_rank = _SEQ
    config.training.disable_cuda_graphs = True
    config.activation_checkpoint = FullAC.Config()
    return config


def llama3_8b_budget() -> Trainer.Config:
    config = _base("8B")
    assert config.model_spec is not None
    config.compile.enable = True
    config.activation_checkpoint = MemoryBudgetAC.Config(memory_budget=0.3)
    config.loss = ChunkedLossWrapper.Config(num_chunks=4)
    if config.parallelism.tensor_parallel_degree > 1:
        config.activation_checkpoint = None
    return config


def llama3_8b_no_ac() -> Trainer.Config:
    config = llama3_8b_fsdp_accum()
    config.activation_checkpoint = None
    config.training.dtype = "bfloat16"
    return config


def llama3_70b_tp_pp_chunked() -> Trainer.Config:
    config = llama3_70b_tp_pp()
    config.loss = ChunkedLossWrapper.Config(num_chunks=16)
    return config
