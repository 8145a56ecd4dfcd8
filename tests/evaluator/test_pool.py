"""Worker pools: job transport, in-process threads, and Ray actors on a three-node local cluster.

The Ray tests share one module-scoped cluster (a head plus two nodes that each offer one unit of a
custom resource standing in for a GPU; DESIGN 8: about 7 s to start, more on a loaded 2-core machine).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run import make_pool
from warpforge.evaluator.run.pool import (
    Completion,
    EvalPool,
    JobSpec,
    LocalPool,
    PoolConfig,
    PoolError,
)
from warpforge.evaluator.run.ray_pool import RayPool
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

ROOT = Path(__file__).parents[2]
PLANTED = Path(__file__).parent / "planted"


def _standin() -> Any:
    """The benchmark's stand-in GPU backend (registered on import; never shipped as a user backend)."""
    if "wf_bench_pipeline" not in sys.modules:
        spec = importlib.util.spec_from_file_location("wf_bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["wf_bench_pipeline"] = module
        spec.loader.exec_module(module)
    return sys.modules["wf_bench_pipeline"]


def spec_for(params: dict[str, Any], key: str, variant: str = "good") -> JobSpec:
    task = load_task_file(PLANTED / "task_double.py")
    return JobSpec.of(Job(task, load_variant(PLANTED / f"{variant}.py"), params, timeout_s=120), key)


def drain(pool: EvalPool, n: int, timeout_s: float = 300) -> dict[str, Completion]:
    done: dict[str, Completion] = {}
    deadline = time.monotonic() + timeout_s
    while len(done) < n and time.monotonic() < deadline:
        for c in pool.poll(timeout=1.0):
            done[c.key] = c
    assert len(done) == n, f"only {len(done)} of {n} completed"
    return done


# --- no Ray ---------------------------------------------------------------------------------------
def test_job_spec_rebuilds_a_task_file_from_its_text_on_another_host(tmp_path: Path) -> None:
    task_file = tmp_path / "task_double.py"
    shutil.copy(PLANTED / "task_double.py", task_file)
    job = Job(load_task_file(task_file), load_variant(PLANTED / "good.py"), {"BLOCK": 128})
    spec = JobSpec.of(job, "k")
    task_file.unlink()  # the worker's host has no such file
    rebuilt = spec.job()
    assert rebuilt.task.name == "double" and rebuilt.task.source_hash == spec.task_hash
    assert rebuilt.params == {"BLOCK": 128} and rebuilt.shapes == job.shapes and rebuilt.dtypes == job.dtypes


def test_local_pool_threads_complete_jobs_and_report_worker_bugs() -> None:
    bench = _standin()
    pool = LocalPool(bench.StandInGpuBackend, {"eval_s": 0.05, "compile_s": 0.0}, workers=2)
    try:
        pool.submit(spec_for({"BLOCK": 128, "num_warps": 4}, "a"))
        pool.submit(spec_for({"BLOCK": 256, "num_warps": 4}, "b"))
        pool.submit_remeasure("ab", spec_for({"BLOCK": 128}, "a"), spec_for({"BLOCK": 256}, "b"))
        # A worker-side exception (here: a task that cannot be loaded) is reported, not raised.
        pool.submit(replace(spec_for({"BLOCK": 128}, "broken"), task="/nonexistent/task.py", task_source=None))
        done = drain(pool, 4)
    finally:
        pool.close()
    assert done["a"].result is not None and done["a"].result.verdict is Verdict.OK
    assert done["a"].result.timing is not None and done["a"].result.timing.source == "simulated"
    assert done["ab"].samples is not None and len(done["ab"].samples[0]) >= 2
    assert done["broken"].result is not None and done["broken"].result.reason == "worker_error"


def test_several_local_workers_on_one_gpu_are_refused() -> None:
    bench = _standin()
    with pytest.raises(PoolError, match="one GPU at once"):
        make_pool(bench.StandInGpuBackend, PoolConfig(workers=2, use_ray=False))
    assert PoolConfig(workers=2).wants_ray and PoolConfig(address="auto").wants_ray
    assert not PoolConfig().wants_ray and not PoolConfig(workers=4, use_ray=False).wants_ray


# --- Ray: a three-node local cluster ----------------------------------------------------------------
GPU = "standin_gpu"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    _standin()
    # Logical CPUs beyond the 2 physical ones: the stand-in actors sleep, the interpreter test's 2 actors work.
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 3, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=2, resources={GPU: 1})
    ray.init(address=c.address, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()
    c.shutdown()


def gpu_pool(**kwargs: Any) -> RayPool:
    bench = _standin()
    backend_kwargs = {"eval_s": kwargs.pop("eval_s", 0.2), "compile_s": 0.05, **kwargs.pop("backend_kwargs", {})}
    config = PoolConfig(
        workers=2, compile_workers=1, use_ray=True, gpu_resource=GPU, backend_kwargs=backend_kwargs, **kwargs
    )
    pool = make_pool(bench.StandInGpuBackend, config)
    assert isinstance(pool, RayPool)
    return pool


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_one_actor_per_gpu_node_with_a_cpu_compile_stage(cluster: Any) -> None:
    pool = gpu_pool()
    try:
        nodes = cluster.get([a.info.remote() for a in pool.actors("eval")])
        assert len({n["node"] for n in nodes}) == 2  # one evaluation actor per stand-in GPU node
        assert pool.pipeline and pool.depth == 5 and "2 GPU workers + 1 CPU compile" in pool.describe
        for i in range(4):
            pool.submit(spec_for({"BLOCK": 128 * (i + 1), "num_warps": 4}, f"j{i}"))
        done = drain(pool, 4)
    finally:
        pool.close()
    for c in done.values():
        assert c.result is not None and c.result.verdict is Verdict.OK and c.result.measured
        assert c.attempts == 1


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_a_killed_actor_is_replaced_and_its_job_retried(cluster: Any) -> None:
    pool = gpu_pool(eval_s=3.0)
    try:
        pool.submit(spec_for({"BLOCK": 128, "num_warps": 4}, "victim"))
        deadline = time.monotonic() + 60
        while not any(s.item is not None and s.role == "eval" for s in pool._slots) and time.monotonic() < deadline:
            pool.poll(timeout=0.1)  # the compile stage finishes, the job reaches a GPU actor
        busy = next(s for s in pool._slots if s.item is not None and s.role == "eval")
        time.sleep(0.5)
        cluster.kill(busy.actor, no_restart=True)
        done = drain(pool, 1)
    finally:
        pool.close()
    result = done["victim"].result
    assert result is not None and result.verdict is Verdict.OK and done["victim"].attempts == 2


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_a_job_that_keeps_killing_its_worker_is_crashed_and_the_pool_goes_on(cluster: Any) -> None:
    pool = gpu_pool(max_attempts=2, backend_kwargs={"die_on": {"BLOCK": 1024}})
    try:
        pool.submit(spec_for({"BLOCK": 1024, "num_warps": 4}, "poison"))
        pool.submit(spec_for({"BLOCK": 128, "num_warps": 4}, "fine"))
        done = drain(pool, 2)
        pool.submit(spec_for({"BLOCK": 256, "num_warps": 4}, "after"))
        done |= drain(pool, 1)
    finally:
        pool.close()
    poison = done["poison"].result
    assert poison is not None and poison.verdict is Verdict.CRASHED and poison.reason == "worker_died"
    assert done["poison"].attempts == 2
    assert all(done[k].result.verdict is Verdict.OK for k in ("fine", "after"))  # type: ignore[union-attr]


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_cpu_actors_run_the_interpreter_backend_in_fresh_children(cluster: Any) -> None:
    pool = make_pool("interpret", PoolConfig(workers=2, use_ray=True))
    try:
        assert isinstance(pool, RayPool) and not pool.pipeline
        pool.submit(spec_for({"BLOCK": 128, "num_warps": 2}, "good"))
        pool.submit(spec_for({"BLOCK": 128, "num_warps": 2}, "wrong", variant="wrong"))
        done = drain(pool, 2)
    finally:
        pool.close()
    assert done["good"].result is not None and done["good"].result.verdict is Verdict.OK, done["good"].result.message
    assert done["good"].result.resources  # the AOT compile ran in the actor's child
    assert done["wrong"].result is not None and done["wrong"].result.verdict is Verdict.INCORRECT


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_a_campaign_on_the_cluster_goes_on_past_a_worker_killing_job(cluster: Any, tmp_path: Path) -> None:
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    bench = _standin()
    spec = CampaignSpec(
        name="ray",
        tasks=[str(PLANTED / "task_double.py")],
        variant_files=[str(PLANTED / "good.py")],
        trials=6,
        backend=bench.StandInGpuBackend.name,
        db_url=f"sqlite:///{tmp_path / 'wf.db'}",
        seed=0,
        sampler="random",
        top_k=2,
    )
    config = PoolConfig(
        workers=2,
        compile_workers=1,
        use_ray=True,
        gpu_resource=GPU,
        max_attempts=2,
        backend_kwargs={"eval_s": 0.1, "compile_s": 0.05, "die_on": {"BLOCK": 1024, "num_warps": 4}},
    )
    task = run_campaign(spec, pool_config=config).tasks[0]
    assert task.workers == "Ray, 2 GPU workers + 1 CPU compile worker(s)"
    assert task.evaluations == 6 and task.variants[0].verdicts == {"ok": 5, "crashed": 1}
    assert task.best_params is not None and len(task.final) == 2 and all(f.remeasured for f in task.final)
