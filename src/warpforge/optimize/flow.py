"""``warpforge optimize``: a whole model in, a patched model and the evidence out.

1. **Profile** one step (optimize/trace.py): on a CPU each op priced on the target GPU's roofline (an
   estimate, labelled so).
2. **Regions** (optimize/regions.py), each matched to a built-in task by what it computes.
3. **Budget by Amdahl's law**: every matched task gets one trial (a verified kernel to patch with); spare
   trials go first, one at a time, to tasks whose trials found no ok configuration yet, the rest of
   ``--trials`` by expected whole-step gain: the region's share times its headroom (its eager ops'
   cost over the task's fused kernel at the speed of light, ``task.flops`` and ``task.bytes_moved``). The
   ceiling is the step time if every matched region ran at that bound.
4. **Search** each task (one campaign each, the evaluator's usual checks), **export** the winners
   (``warpforge export``'s package; untimed on a CPU, flagged), **patch** the regions by module path
   (optimize/patching.py) and **prove** it in a separate process (optimize/prove.py): outputs, then N
   SGD steps' losses and the gradients of the first, against the unpatched model. In a training step a
   task with no backward kernel (a family's member) is patched with its kernel forward and torch autograd
   of the task's reference as its backward, and its status says so.

Example::

    >>> report = optimize(OptimizeOptions(target="./qwen3-tiny", trials=8, out=Path("opt")))  # doctest: +SKIP
    >>> report.coverage                                                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from warpforge.errors import UsageError
from warpforge.estimate.step import step_basis, step_peaks
from warpforge.evaluator.gpus import GpuPeaks, peaks_for
from warpforge.optimize.estimate_target import priced_trace
from warpforge.optimize.patch_spec import PatchSpec, dump_patches
from warpforge.optimize.plans import PlanSection
from warpforge.optimize.regions import Region, coverage, cut_regions, model_coverage
from warpforge.optimize.report import Checks, OptimizeReport, RegionRow, SpeedupEstimate
from warpforge.optimize.target import Target, load_target


@dataclass
class OptimizeOptions:
    target: str
    out: Path
    batch: int = 2
    seq: int = 64
    dtype: str = "float16"  # the CLI's auto: bfloat16 on a GPU (the interpreter's bf16 tl.dot is wrong)
    train: bool = True
    gpu: str = "H100"
    trials: int = 8
    backend: str = "auto"
    db: str | None = None
    steps: int = 3
    namespace: str = "wf_opt"
    seed: int = 0
    lr: float = 1e-2
    cluster: str | None = None  # a planner cluster (preset or YAML): add its best parallel plans to the report
    nodes: int | None = None
    plan_seq: int | None = None  # the training job's sequence length for the planner (default: seq)
    global_batch: int | None = None
    on_stage: Callable[[str], None] = field(default=lambda s: None)


def _peaks(gpu: str) -> GpuPeaks:
    peaks = peaks_for(gpu)
    if peaks is None:
        from warpforge.evaluator.gpus import known_gpus

        known = ", ".join(known_gpus())
        raise UsageError(f"--gpu {gpu!r}: no peak figures for it; known GPUs: {known}")
    return peaks


def _fused_seconds(region: Region, peaks: GpuPeaks, dtype: torch.dtype) -> float:
    """The region's forward as the task's one kernel at the speed of light (its backward unchanged)."""
    from warpforge.kernels.task import get_task

    fwd = 0.0
    for m in region.matches:  # a helper returning several tensors: one kernel per output
        task = get_task(m.task)
        fwd += m.items * peaks.sol_ms(task.flops(m.shape, dtype), task.bytes_moved(m.shape, dtype), dtype) / 1e3
    return fwd + sum(o.seconds for o in region.ops if o.backward)


def _patchable(region: Region, train: bool) -> str:
    """Why a matched region cannot be patched ("" when it can). In a training step a task without a backward
    kernel is patched with torch autograd of its reference as the backward (:func:`reference_backward`)."""
    from warpforge.kernels.task import get_task

    assert region.match is not None
    if region.source == "loss":
        return (
            "the step's loss is warpforge's stand-in for a training loss (the output's mean square), not "
            "the model's code: only the model is patched"
        )
    if get_task(region.match.task).n_params:
        return "a by-path task"
    return ""


def reference_backward(region: Region, train: bool) -> bool:
    """The region's patch runs the kernel forward and torch autograd of the task's reference backward: a
    training step, a task with no backward kernel (a family's member such as ``elementwise[gelu_tanh]``)."""
    return train and region.match is not None and not region.match.has_backward


def allocate(regions: list[Region], gains: dict[str, float], trials: int) -> dict[str, int]:
    """Trials per task: one each, the rest in proportion to the expected whole-step gain of its regions."""
    tasks = sorted({r.match.task_name for r in regions if r.match is not None})
    if not tasks:
        return {}
    budget = {t: 1 for t in tasks}
    spare = max(0, trials - len(tasks))
    total = sum(gains.values())
    if spare and total > 0:
        shares = {t: gains.get(t, 0.0) / total for t in tasks}
        extra = {t: int(spare * shares[t]) for t in tasks}
        left = spare - sum(extra.values())
        for t in sorted(tasks, key=lambda t: -(spare * shares[t] - extra[t]))[:left]:
            extra[t] += 1
        for t in tasks:
            budget[t] += extra[t]
    return budget


def _search(tasks: dict[str, int], opts: OptimizeOptions, stamp: str) -> tuple[dict[str, str], dict[str, int]]:
    """One campaign per task, within the budget ``tasks`` allocates: first one trial each; then the spare
    trials go one at a time to the tasks with no ok configuration yet (a region without a verified kernel
    gains nothing, however large its share), and what is left as allocated (by expected gain). Returns the
    campaign's name and the trials it ran, per task."""
    from warpforge.kernels.members import op_identifier
    from warpforge.kernels.task import get_task
    from warpforge.preflight import check_run
    from warpforge.search.engine.campaign import run_campaign
    from warpforge.search.engine.spec import CampaignSpec

    names = {task: f"optimize-{stamp}-{op_identifier(task)}" for task in tasks}
    used: dict[str, int] = {}
    ok: dict[str, bool] = {}

    def run(task: str, n: int, why: str) -> None:
        opts.on_stage(f"search {task}: {why}")
        # a training step searches kernels with a backward where the task has one (the others are patched with
        # their reference's autograd as the backward)
        training = opts.train and get_task(task).has_backward
        spec = check_run(
            CampaignSpec(
                name=names[task],
                tasks=[task],
                trials=n,
                backend=opts.backend,
                db_url=opts.db,
                seed=opts.seed,
                top_k=1,
                resume=task in used,
                proposer_config={"training": training},
            )
        )
        summary = run_campaign(spec)
        used[task] = n
        ok[task] = ok.get(task, False) or any(v.verdicts.get("ok", 0) for t in summary.tasks for v in t.variants)

    spare = sum(tasks.values()) - len(tasks)
    for task in tasks:
        run(task, 1, "1 trial")
    retry = [t for t in sorted(tasks, key=lambda t: -tasks[t]) if not ok[t]]
    while spare and retry:
        for task in list(retry):
            if spare:
                run(task, used[task] + 1, f"trial {used[task] + 1} (no ok configuration yet)")
                spare -= 1
                if ok[task]:
                    retry.remove(task)
    for task in sorted(tasks, key=lambda t: -tasks[t]):
        more = min(spare, tasks[task] - used[task])
        if more > 0:
            run(task, used[task] + more, f"{used[task] + more} trial(s) in all")
            spare -= more
    return names, used


def _export(tasks: list[str], opts: OptimizeOptions) -> tuple[list[Any], dict[str, str]]:
    """The export plans of every task with a verified winner (export/plan.py); (plans, task -> why not)."""
    from warpforge.db.queries import Reader
    from warpforge.export.op_plan import ExportRefused
    from warpforge.export.plan import plan_task
    from warpforge.kernels.task import get_task

    reader = Reader(opts.db)
    plans, refused = [], {}
    from warpforge.export.source import training_facts

    for name in tasks:
        task = get_task(name)
        try:
            plan = plan_task(reader, task, allow_untimed=True)
        except ExportRefused as e:
            refused[name] = str(e).splitlines()[0]
            continue
        if opts.train and task.has_backward and training_facts(task, plan.variant_source) is None:
            # its export would have no autograd: the training step could not differentiate through it
            refused[name] = f"the winner ({plan.variant_name}) has no backward kernel (a training step needs one)"
            continue
        plans.append(plan)
    return plans, refused


def _settings(opts: OptimizeOptions, target: Target) -> dict[str, Any]:
    """How the proof built and stepped the target: what the package's tests rebuild it with (tests/target.json)."""
    from warpforge.optimize.prove import TOLERANCES

    out_rtol, loss_rtol, grad_rtol = TOLERANCES.get(target.dtype, TOLERANCES[torch.float32])
    return {
        "kind": target.kind,
        "file": Path(target.spec).name if target.kind == "kernelbench" else "",
        "batch": target.batch,
        "seq": target.seq,
        "dtype": opts.dtype,
        "seed": opts.seed,
        "steps": opts.steps,
        "lr": opts.lr,
        "train": opts.train,
        "tolerances": {"output": out_rtol, "loss": loss_rtol, "grad": grad_rtol},
    }


def write_package(
    dest: Path,
    plans: list[Any],
    ns: str,
    patches_text: str,
    bundle_source: dict[str, Any],
    checks: Checks | None = None,
) -> None:
    """The optimize run's package: the ops and ``patch(model)`` over the patches of ``patches_text``
    (export/optimize_package.py). ``bundle_source``: the target's files and settings and the README's facts."""
    import warpforge.optimize.patching as patching
    from warpforge.export.optimize_package import optimize_bundle, shipped_source
    from warpforge.export.package import render_package, write_tree

    summary = dict(bundle_source["summary"], proven=checks is not None)
    if checks is not None:
        summary.update(
            checks.model_dump(
                include={
                    "max_abs_diff",
                    "output_tolerance",
                    "losses_match",
                    "grads_match",
                    "grad_max_rel_diff",
                    "interpreted",
                }
            )
        )
    bundle = optimize_bundle(
        ns,
        shipped_source(Path(str(patching.__file__)), "optimize/patching.py"),
        patches_text,
        bundle_source["model_prefix"],
        {k: v.encode() for k, v in bundle_source["target"].items()},
        bundle_source["settings"],
        summary,
    )
    write_tree(dest, render_package(plans, ns, "package", optimize=bundle))


def _specs_for(region: Region, dtypes: list[str], train: bool = False) -> list[PatchSpec]:
    """The region's patch: one spec, or one per output of a helper returning several tensors."""
    from warpforge.kernels.members import op_identifier
    from warpforge.kernels.task import get_task

    specs = []
    module, _, rest = region.name.partition("::")
    if region.loose is not None:
        return [_loose_spec(region, dtypes, train)]
    for m in region.matches:
        task = get_task(m.task)
        ranks = [t.dim() for t in task.make_inputs(m.shape, torch.float32, 0, "cpu") if isinstance(t, torch.Tensor)]
        specs.append(
            PatchSpec(
                region=region.name,
                module=module,
                function=rest.partition("#")[0] if rest else "",
                op=op_identifier(m.task_name),
                task=m.task_name,
                shape=dict(m.shape),
                order=list(m.order),
                flatten=list(m.flatten),
                ranks=ranks,
                zero_shapes=[list(s) for s in m.zero_shapes],
                reduce=m.reduce,
                ignore_index=m.ignore_index,
                dtypes=dtypes,
                helper=region.source == "helper",
                output=m.output,
                per_item=m.items > 1,
                helper_file=region.helper_file,
                reference_backward=train and not m.has_backward,
            )
        )
    return specs


def _loose_spec(region: Region, dtypes: list[str], train: bool) -> PatchSpec:
    """A loose region's patch: the run of its module's calls it replaces (optimize/loose_patch.py)."""
    from warpforge.kernels.members import op_identifier
    from warpforge.kernels.task import get_task

    cut, m = region.loose, region.match
    assert cut is not None and m is not None
    task = get_task(m.task)
    ranks = [t.dim() for t in task.make_inputs(m.shape, torch.float32, 0, "cpu") if isinstance(t, torch.Tensor)]
    metas, tuples = cut.placeholders()
    return PatchSpec(
        region=region.name,
        module=cut.path,
        op=op_identifier(m.task_name),
        task=m.task_name,
        shape=dict(m.shape),
        order=list(m.order),
        flatten=list(m.flatten),
        ranks=ranks,
        zero_shapes=[list(s) for s in m.zero_shapes],
        reduce=m.reduce,
        ignore_index=m.ignore_index,
        dtypes=dtypes,
        per_item=m.items > 1,
        loose_start=cut.start,
        loose_end=cut.end,
        loose_names=cut.names,
        loose_reads=[list(r) for r in cut.reads],
        loose_input_shapes=[list(t.shape) for t in cut.inputs],
        loose_input_dtypes=[str(t.dtype).removeprefix("torch.") for t in cut.inputs],
        loose_input_floating=[t.is_floating_point() for t in cut.inputs],
        loose_output_shape=list(cut.output.shape),
        loose_placeholders=metas,
        loose_tuples=tuples,
        loose_guard=cut.guard,
        reference_backward=train and not m.has_backward,
    )


class _CampaignReader:
    """A read layer that sees one campaign's decisions only: the package of a stored run takes the winners that
    run's campaigns accepted, not a later campaign's."""

    def __init__(self, reader: Any, campaign: str) -> None:
        self._reader, self._campaign = reader, campaign

    def decisions(self, *, campaign: str | None = None, task: str | None = None, gpu: str | None = None) -> Any:
        return self._reader.decisions(campaign=self._campaign, task=task, gpu=gpu)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def package_from_source(source: dict[str, Any], dest: Path, db: str | None, namespace: str | None = None) -> str:
    """Write a stored optimize run's package (``package_source`` of its report) into ``dest``, its ops planned
    from the run's own campaigns; returns the namespace. ExportRefused where a campaign's winner is gone."""
    from warpforge.db.queries import Reader
    from warpforge.export.plan import plan_task
    from warpforge.kernels.task import get_task

    reader = Reader(db)
    plans = [
        plan_task(_CampaignReader(reader, campaign), get_task(task), allow_untimed=True)
        for task, campaign in sorted(source["campaigns"].items())
    ]
    ns = namespace or str(source["namespace"])
    checks = Checks.model_validate(source["checks"]) if source.get("checks") else None
    write_package(dest, plans, ns, str(source["patches"]), source, checks)
    return ns


def _run_prove(request: dict[str, Any]) -> Checks:
    env = dict(os.environ)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"  # the exported Triton kernels themselves, in the interpreter
    proc = subprocess.run(
        [sys.executable, "-m", "warpforge.optimize.prove"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Checks(error=f"the proof's process failed (exit {proc.returncode}): {tail}")
    return Checks.model_validate_json(lines[-1])


PACKAGE_SOURCE = "package_source.json"  # beside report.json: what the database keeps to write the package again

# The shipped proof: the package's own tests/test_patched_model.py, run where importing warpforge fails.
SHIPPED_PROOF = """
import runpy, sys
sys.modules["warpforge"] = None  # what ships is proven: the package alone, warpforge not importable
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_shipped_proof(package_dir: Path) -> Checks:
    """Run the package's own model comparison (its tests/test_patched_model.py) with warpforge blocked."""
    package_dir = package_dir.resolve()  # the process runs in it: a relative --out would be read twice over
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(package_dir), PYTHONDONTWRITEBYTECODE="1")  # nothing written into the package
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    script = package_dir / "tests" / "test_patched_model.py"
    proc = subprocess.run(
        [sys.executable, "-c", SHIPPED_PROOF, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=package_dir,
        timeout=3600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Checks(error=f"the package's own proof failed (exit {proc.returncode}): {tail}")
    return Checks.model_validate_json(lines[-1])


def _prove(
    opts: OptimizeOptions, target: Target, specs: list[PatchSpec], plans: list[Any], bundle_source: dict[str, Any]
) -> Checks:
    """Each op at its region's shape (optimize/prove.py, warpforge's judge), then the patched model against
    the unpatched one by the package's own test with warpforge blocked, over the regions whose ops passed
    (a target without a bundled copy, ``module:function``, is compared by optimize/prove.py)."""
    from warpforge.optimize.patch_spec import load_patches

    package_dir = opts.out / "package"
    patches = opts.out / "patches.json"
    patches.write_text(dump_patches(specs))
    write_package(package_dir, plans, opts.namespace, patches.read_text(), bundle_source)
    request = {
        "target": target.spec,
        "batch": target.batch,
        "seq": target.seq,
        "dtype": opts.dtype,
        "train": opts.train,
        "steps": opts.steps,
        "seed": opts.seed,
        "lr": opts.lr,
        "package_dir": str(package_dir),
        "namespace": opts.namespace,
        "patches": str(patches),
        "ops_only": bool(bundle_source["target"]),
    }
    checks = _run_prove(request)
    if checks.error or not bundle_source["target"]:
        return checks
    refused = dict(checks.fallback)
    proven = [s for s in load_patches(patches.read_text()) if s.region not in refused]
    patches.write_text(dump_patches(proven))
    if not proven:
        return Checks(fallback=refused, error="no region's op passed its check at the region's shape")
    write_package(package_dir, plans, opts.namespace, patches.read_text(), bundle_source)
    checks = run_shipped_proof(package_dir)
    checks.fallback = {**checks.fallback, **refused}
    return checks


def _plans(opts: OptimizeOptions, target: Target) -> PlanSection:
    from warpforge.optimize.plans import best_plans, model_spec

    if target.kind != "transformers":
        raise UsageError(
            f"--cluster needs a transformers config folder (its layers, widths and heads); "
            f"{target.spec} is a {target.kind} target"
        )
    opts.on_stage(f"plan the parallel layout on {opts.cluster}")
    spec = model_spec(target.config, opts.plan_seq or opts.seq, name=target.name)
    return best_plans(spec, str(opts.cluster), opts.nodes, opts.global_batch)


def optimize(opts: OptimizeOptions) -> OptimizeReport:
    from warpforge.kernels.task import get_task
    from warpforge.kernels.taskdef import dtype_name, parse_dtype

    dtype = parse_dtype(opts.dtype)
    peaks = step_peaks(opts.gpu) or _peaks(opts.gpu)
    target = load_target(opts.target, opts.batch, opts.seq, dtype)
    from warpforge.db.session import Database

    Database(opts.db).upgrade()  # a database it cannot write is said now, before minutes of profiling and search
    plans = _plans(opts, target) if opts.cluster else None  # a bad --cluster is said now too
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / PACKAGE_SOURCE).unlink(missing_ok=True)  # an earlier run's: this one writes its own, or none
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")

    opts.on_stage("profile one step")
    model, inputs = target.build(opts.seed)
    trace = priced_trace(model, inputs, target.loss if opts.train else None, peaks)
    opts.on_stage("cut and match regions")
    regions = cut_regions(model, trace)
    trace.streams.clear()  # the forward's tensors themselves: a loose region keeps its own run's
    step_s = trace.total_s

    fused = {r.name: _fused_seconds(r, peaks, dtype) for r in regions if r.match is not None}
    gains: dict[str, float] = {}
    for r in regions:
        if r.match is not None:
            gains[r.match.task_name] = gains.get(r.match.task_name, 0.0) + max(0.0, r.seconds - fused[r.name])
    ceiling_s = step_s - sum(max(0.0, r.seconds - fused[r.name]) for r in regions if r.match is not None)
    why_not = {r.name: _patchable(r, opts.train) for r in regions if r.match is not None}
    wanted = [r for r in regions if r.match is not None and not why_not[r.name]]
    budget = allocate(wanted, gains, opts.trials)
    campaigns, budget = _search(budget, opts, stamp) if budget else ({}, {})
    opts.on_stage("export the winners")
    export_plans, refused = _export(sorted(campaigns), opts) if campaigns else ([], {})
    untimed = any(p.untimed for p in export_plans)
    package_dir = opts.out / "package" if export_plans else opts.out
    specs = []
    for r in wanted:
        assert r.match is not None
        if r.match.task_name in refused:
            why_not[r.name] = f"no verified winner: {refused[r.match.task_name]}"
            continue
        specs += _specs_for(r, [dtype_name(d) for d in get_task(r.match.task).dtypes], opts.train)
    opts.on_stage("patch and prove" + (f" ({opts.steps} training steps)" if opts.train else ""))
    nothing = Checks(error="nothing was patched, so nothing to prove")
    from warpforge.export.optimize_package import target_files

    task_of = {s.region: s.task or s.op for s in specs}
    bundle_source: dict[str, Any] = {
        "model_prefix": "lm." if target.kind == "transformers" else "",
        "target": {k: v.decode() for k, v in target_files(target.kind, target.spec).items()},
        "settings": _settings(opts, target),
        "summary": {
            "target": target.name,
            "dtype": opts.dtype,
            "batch": target.batch,
            "seq": target.seq,
            "train": opts.train,
            "steps": opts.steps,
            "untimed": untimed,
            "regions": [{"name": r, "task": task_of[r], "status": "verified"} for r in sorted(task_of)],
        },
    }
    checks = _prove(opts, target, specs, export_plans, bundle_source) if specs else nothing
    if specs and not checks.error:
        patched_now = [row for row in bundle_source["summary"]["regions"] if row["name"] in checks.kernel_calls]
        bundle_source["summary"]["regions"] = patched_now
        write_package(
            package_dir, export_plans, opts.namespace, (opts.out / "patches.json").read_text(), bundle_source, checks
        )
        # what `warpforge export --optimize-run ID` writes the package again from (stored with the report)
        source = {
            "version": 1,
            "namespace": opts.namespace,
            "patches": (opts.out / "patches.json").read_text(),
            "campaigns": {t: c for t, c in campaigns.items() if t not in refused},
            "checks": json.loads(checks.model_dump_json()),
            **bundle_source,
        }
        (opts.out / PACKAGE_SOURCE).write_text(json.dumps(source, indent=2, sort_keys=True) + "\n")

    patched = set(checks.kernel_calls)
    after_s = step_s - sum(max(0.0, r.seconds - fused[r.name]) for r in regions if r.name in patched)
    rows = [
        RegionRow(
            name=r.name,
            kind=r.kind,
            share=round(r.share, 4),
            task="; ".join(m.describe() for m in r.matches) if r.match else None,
            status=_status(r, why_not, checks, reference_backward(r, opts.train)),
            patched=r.name in patched,
            estimated_us=round(r.seconds * 1e6, 3),
            fused_us=round(fused[r.name] * 1e6, 3) if r.name in fused else None,
        )
        for r in regions
    ]
    basis = (
        f"speed of light on {peaks.name} per op of the eager step (max of FLOPs / peak and bytes / bandwidth; "
        "each op its own kernel) against the patched regions' forward as one kernel at the task's FLOPs and "
        "bytes; backward ops unchanged; an estimate, not a time"
    )
    basis = step_basis(peaks) or basis
    report = OptimizeReport(
        target=target.spec,
        kind=target.kind,
        train=opts.train,
        dtype=opts.dtype,
        batch=opts.batch,
        seq=opts.seq,
        gpu=peaks.name,
        regions=rows,
        coverage=round(coverage(regions), 4),
        checks=checks,
        model_coverage=round(model_coverage(regions), 4),
        speedup=SpeedupEstimate(
            estimated=round(step_s / after_s, 4) if after_s > 0 else None,
            basis=basis,
            before_us=round(step_s * 1e6, 3),
            after_us=round(after_s * 1e6, 3),
            ceiling=round(step_s / ceiling_s, 4) if ceiling_s > 0 else None,
        ),
        campaigns=campaigns,
        trials=budget,
        untimed=untimed,
        package=str(package_dir),
        patches=str(opts.out / "patches.json") if specs else None,
        plans=plans,
    )
    (opts.out / "report.json").write_text(report.model_dump_json(indent=2) + "\n")
    (opts.out / "report.md").write_text(report.markdown())
    return report


def _status(r: Region, why_not: dict[str, str], checks: Checks, backward: bool = False) -> str:
    if r.match is None:
        return "no task: " + (
            "the LLM proposer can take its problem (--proposer llm)"
            if r.source != "rest"
            else "loose tensor ops of its module"
        )
    if why_not.get(r.name):
        return "matched; not patched: " + why_not[r.name]
    if r.name in checks.kernel_calls:
        return "patched" + (" (backward: torch autograd of the task's reference)" if backward else "")
    if r.name in checks.fallback:
        return "matched; not patched: " + checks.fallback[r.name]
    return "matched; not patched: the proof did not run it"
