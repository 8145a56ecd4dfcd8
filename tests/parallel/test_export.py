"""Megatron-LM arguments and torchtitan TOML for chosen plans."""

from __future__ import annotations

import pytest
import tomllib

from warpforge.parallel import PlanConfig, SpecError, load_model
from warpforge.parallel.export import export_plan

L70 = load_model("llama3-70b")


def test_megatron_arguments() -> None:
    ex = export_plan(
        L70, PlanConfig(tp=8, pp=4, dp=2, cp=2, micro_batch=1, interleave=2, zero=1, recompute="selective"), "megatron"
    )
    for flag in (
        "--tensor-model-parallel-size 8",
        "--pipeline-model-parallel-size 4",
        "--context-parallel-size 2",
        "--num-layers-per-virtual-pipeline-stage 10",
        "--sequence-parallel",
        "--use-distributed-optimizer",
        "--recompute-granularity selective",
        "--group-query-attention",
        "--num-query-groups 8",
        "--swiglu",
        "--global-batch-size 512",
    ):
        assert flag in ex.args
    full = export_plan(L70, PlanConfig(tp=8, pp=4, dp=2, zero=3, recompute="full"), "megatron")
    assert "--recompute-granularity full" in full.args and "--use-megatron-fsdp" in full.args
    assert "--data-parallel-sharding-strategy optim_grads_params" in full.args


def test_megatron_moe_and_uneven_pipeline() -> None:
    ds = load_model("deepseek-v3-like")
    ex = export_plan(ds, PlanConfig(tp=1, pp=16, dp=8, ep=8), "megatron")
    assert "--num-experts 256" in ex.args and "--moe-router-topk 8" in ex.args
    assert "--decoder-first-pipeline-num-layers 2" in ex.args
    assert "--decoder-last-pipeline-num-layers 3" in ex.args
    assert "--moe-layer-freq '([0]*3+[1]*58)'" in ex.args


@pytest.mark.parametrize(
    ("zero", "replicate", "shard", "reshard"), [(0, 4, 1, "default"), (1, 1, 4, "never"), (3, 1, 4, "always")]
)
def test_torchtitan_toml(zero: int, replicate: int, shard: int, reshard: str) -> None:
    plan = PlanConfig(tp=8, pp=2, dp=4, micro_batch=2, interleave=2, zero=zero, recompute="full")
    doc = tomllib.loads(export_plan(L70, plan, "torchtitan").text)
    par = doc["parallelism"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"]) == (8, 2)
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (replicate, shard)
    assert par["fsdp_reshard_after_forward"] == reshard
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_microbatch_size"] == 2
    assert doc["training"] == {"local_batch_size": 128, "global_batch_size": 512, "seq_len": 8192}
    assert doc["activation_checkpoint"]["mode"] == "full"


def test_unknown_format() -> None:
    with pytest.raises(SpecError, match="unknown export format"):
        export_plan(L70, PlanConfig(), "nemo-run")
