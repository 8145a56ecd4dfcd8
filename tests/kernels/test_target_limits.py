"""Templates are judged with the compile target's limits (kernels/targets.py), never a GPU's number of their own."""

from __future__ import annotations

import ast

import pytest
from newtask_harness import load

from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.stages import space_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.targets import LIMITS, capability, constraint_shape, limits
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants

# 128 x 256 output tiles, K steps of 64, 3 stages of fp16 A and B tiles: 3 * (128*64 + 64*256) * 2 = 147,456 B of
# shared memory, over sm_86's 99 KiB (101,376 B) and within sm_90's 227 KiB (232,448 B) and sm_80's 163 KiB.
BIG_TILE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
SHAPE = {"M": 4096, "N": 4096, "K": 4096}


def test_no_template_writes_a_gpus_shared_memory() -> None:
    # sm_75's 65,536 is also a power-of-two block size (the row templates' MAX_BLOCK, in elements): left out.
    per_block = {lim.shared_bytes for lim in LIMITS.values()} - {65536}
    found = []
    for path in sorted(TEMPLATES_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value in per_block:
                found.append(f"{path.relative_to(TEMPLATES_DIR)}:{node.lineno}: {node.value}")
    assert not found, "templates read shape['SMEM_BYTES'] instead:\n" + "\n".join(found)


@pytest.mark.parametrize(("target", "fits"), [("sm_90", True), ("sm_80", True), ("sm_86", False), ("sm_89", False)])
def test_a_template_is_judged_with_its_targets_shared_memory(target: str, fits: bool) -> None:
    module = load(next(v for v in builtin_variants("matmul") if v.name == "tiled_grouped"))
    assert module.constraints(BIG_TILE, constraint_shape(SHAPE, target)) is fits


def test_the_evaluator_enumerates_the_space_for_its_target() -> None:
    task = get_task("matmul")
    variant = next(v for v in builtin_variants("matmul") if v.name == "tiled_grouped")
    backend = get_backend("interpret", pool=ChildPool())
    try:
        feasible = {}
        for target in ("sm_90", "sm_86"):
            job = Job(task, variant, {}, target=target)
            job.shapes = [SHAPE]
            failure, feasible[target] = space_stage(backend.pool, job)
            assert failure is None, failure
    finally:
        backend.pool.close()
    assert BIG_TILE in feasible["sm_90"] and BIG_TILE not in feasible["sm_86"]
    assert all(c in feasible["sm_90"] for c in feasible["sm_86"])


def test_a_capability_outside_the_table_is_refused() -> None:
    assert capability("sm_90a") == 90 and limits("sm_90a").shared_bytes == 232448
    with pytest.raises(ValueError, match="no shared-memory table for sm_61"):
        limits("sm_61")
    with pytest.raises(ValueError, match="not a compile target"):
        capability("hopper")
