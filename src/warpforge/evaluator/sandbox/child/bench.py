"""The child's timing modes: ``reference``, ``bench`` and ``ab`` (raw samples only; statistics are trusted-side).

Timing one call (``Timer.time``): on a GPU, flush L2 (zero a 256 MiB buffer), record a start event,
launch, record an end event, wait for the end event, then time a *device-wide* synchronize on the
host clock. Work the candidate hid on a side stream is not between the events but still delays that
synchronize (``pending_ms``), which the trusted side rejects. On the CPU (interpreter tests of this
plumbing) a call is timed with ``perf_counter`` and nothing is pending.

Fresh inputs on every timed call: the parent sends seeds for a few input sets plus, per call, one
element to overwrite (set, argument, flat position, value). Before each call the working buffers are
refilled from a set and that element is changed, outside the timed region: the buffers' addresses never
change but their contents never repeat, so a cache keyed on pointer, shape, call count or contents
returns a stale answer, and the parent rechecks the outputs of chosen timed calls against a float64
reference of exactly those inputs.

The reference is timed before the candidate is imported, on inputs of its own, so the candidate can
neither slow it down nor find its output in freed memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from warpforge.evaluator.sandbox.child.backward import (
    forward_backward,
    timed_reference,
    timed_training,
    upstream_gradient,
)
from warpforge.evaluator.sandbox.child.common import (
    ORIGINAL_ALLOC,
    PERF,
    SAVE,
    Watch,
    as_tuple,
    error_info,
    load_candidate,
    mark,
    sync,
)
from warpforge.evaluator.sandbox.child.model_new import entry_for

EVENT = torch.cuda.Event  # captured before the candidate exists
DEVICE_SYNC = torch.cuda.synchronize


class Timer:
    """Times one call: (device ms, ms a device-wide sync still waited after the end event, output)."""

    def __init__(self, device: str, flush_bytes: int) -> None:
        self.cuda = device.startswith("cuda")
        self.cache = (
            ORIGINAL_ALLOC["empty"](flush_bytes, dtype=torch.int8, device=device) if self.cuda and flush_bytes else None
        )

    def time(self, fn: Any) -> tuple[float, float, Any]:
        if not self.cuda:
            t0 = PERF()
            out = fn()
            return (PERF() - t0) * 1e3, 0.0, out
        if self.cache is not None:
            self.cache.zero_()
        start, end = EVENT(enable_timing=True), EVENT(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        t0 = PERF()
        DEVICE_SYNC()
        pending = (PERF() - t0) * 1e3
        return float(start.elapsed_time(end)), pending, out


def _inputs(task: Any, case: dict[str, Any], seed: int, device: str) -> tuple[Any, ...]:
    from warpforge.kernels.taskdef import parse_dtype

    return tuple(task.make_inputs(case["shape"], parse_dtype(case["dtype"]), int(seed), device))


def _refill(work: tuple[Any, ...], sets: list[tuple[Any, ...]], perturb: list[Any]) -> None:
    """Copy input set ``j`` into the working buffers and overwrite one element: contents never repeat."""
    j, arg, pos, value = perturb
    for w, s in zip(work, sets[int(j)]):
        if isinstance(w, torch.Tensor):
            w.copy_(s)
    target = work[int(arg)]
    index = tuple(int(i) for i in _unravel(int(pos), tuple(target.shape)))
    target[index] = value


def _unravel(pos: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(pos % dim)
        pos //= dim
    return list(reversed(index))


def _grad_out(task: Any, inputs: tuple[Any, ...], seed: int, device: str) -> torch.Tensor:
    """The case's upstream gradient: shaped like the reference's output (its shape read on the meta device)."""
    meta = tuple(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs)
    out = as_tuple(task.reference(*meta))[0]
    return upstream_gradient(tuple(out.shape), out.dtype, seed).to(device)


def _save_outputs(out: Any, path: Path) -> bool:
    outs = as_tuple(out)
    if not all(type(o) is torch.Tensor for o in outs):
        return False
    SAVE({"out": [o.detach().to("cpu").clone() for o in outs]}, path)
    return True


def run_reference(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Time the reference alone (no candidate): the parent's basis for hang bounds on a GPU."""
    from warpforge.kernels.task import load_task_file

    task = load_task_file(req["task_path"])
    timer = Timer(req["device"], 0)
    cases = []
    for case in req["cases"]:
        inputs = _inputs(task, case, case["seed"], req["device"])
        task.reference(*inputs)
        sync(req["device"])
        cases.append(
            {
                "id": case["id"],
                "ms": [
                    timer.time(lambda inputs=inputs: task.reference(*inputs))[0] for _ in range(int(req.get("reps", 5)))
                ],
            }
        )
    return {"cases": cases}


def run_bench(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Reference first (before the candidate is imported), then the candidate on fresh inputs per call."""
    from warpforge.kernels.task import load_task_file

    task = load_task_file(req["task_path"])
    device = req["device"]
    timer = Timer(device, int(req.get("flush_bytes", 0)))
    warmup, reps = int(req["warmup"]), int(req["reps"])
    # A training bench (req "training", job.training_check): every timed call is launch_forward then
    # launch_backward, each timed alone; the reference is torch's forward then autograd's backward.
    training = bool(req.get("training"))
    cases: list[dict[str, Any]] = []
    for case in req["cases"]:
        inputs = _inputs(task, case, case["ref_seed"], device)
        if training:
            ref_grad = _grad_out(task, inputs, case["grad_seed"], device)
            pairs = [
                timed_reference(timer, task.reference, inputs, task.grad_inputs, ref_grad) for _ in range(warmup + reps)
            ][warmup:]
            cases.append(
                {
                    "id": case["id"],
                    "ref_ms": [f + b for f, b in pairs],
                    "ref_forward_ms": [f for f, _ in pairs],
                    "ref_backward_ms": [b for _, b in pairs],
                }
            )
            continue
        samples = [timer.time(lambda inputs=inputs: task.reference(*inputs))[0] for _ in range(warmup + reps)][warmup:]
        cases.append({"id": case["id"], "ref_ms": samples})
    watch = Watch()
    try:
        module = load_candidate(scratch / req["candidate"], sha256=req.get("candidate_sha256"))
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
        return {"error": error_info(exc, "import")}
    params = req["params"]
    tampered: set[str] = set(watch.tampered())
    entry = entry_for(module, req)
    for record, case in zip(cases, req["cases"]):
        sets = [_inputs(task, case, seed, device) for seed in case["seeds"]]
        work = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0])
        recheck = {int(r) for r in case["recheck"]}
        ms, pending, saved = [], [], []
        forward_ms, backward_ms = [], []
        grad_out = _grad_out(task, work, case["grad_seed"], device) if training else None
        try:
            # A ModelNew is built once per case: its state shares the work buffers, refilled per call
            call, args = entry.bind(work, case)
            mark("compile")
            call(*args, **params)  # compile and warm outside the timed region
            if grad_out is not None:
                forward_backward(module, work, grad_out, params)
            sync(device)
            mark(f"bench:{case['id']}")
            for r in range(warmup + reps):
                _refill(work, sets, case["perturb"][r])
                if grad_out is not None:
                    t_f, t_b, p, out = timed_training(timer, module, work, grad_out, params)
                    t = t_f + t_b
                else:
                    t, p, out = timer.time(lambda call=call, args=args: call(*args, **params))
                tampered.update(watch.tampered())
                if r >= warmup:
                    ms.append(t)
                    pending.append(p)
                    if grad_out is not None:
                        forward_ms.append(t_f)
                        backward_ms.append(t_b)
                if r in recheck and _save_outputs(out, scratch / f"timed_{case['id']}_{r}.pt"):
                    saved.append(r)
                del out
            sync(device)
            mark(f"wall:{case['id']}")
            for _ in range(int(case.get("wall_calls", req.get("wall_calls", 20)))):
                if grad_out is not None:  # the same work as a timed call: forward then backward
                    forward_backward(module, work, grad_out, params)
                else:
                    call(*args, **params)
            sync(device)
            mark(f"wall_end:{case['id']}")
        except BaseException as exc:  # noqa: BLE001 - any failure of the candidate's timed calls is reported
            return {"error": error_info(exc, "bench"), "cases": cases}
        record.update({"ms": ms, "pending_ms": pending, "saved": saved, "threads": watch.new_threads()})
        if grad_out is not None:
            record.update({"forward_ms": forward_ms, "backward_ms": backward_ms})
    return {
        "cases": cases,
        "tampered": sorted(tampered),
        "state_changed": watch.state_changed(),
        "device": _device_info(device),
    }


def run_ab(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Two candidates interleaved round by round (ABAB... with the order alternated), same inputs per round."""
    from warpforge.kernels.task import load_task_file

    task = load_task_file(req["task_path"])
    device = req["device"]
    timer = Timer(device, int(req.get("flush_bytes", 0)))
    watch = Watch()
    modules, launches = [], []
    for i, cand in enumerate(req["candidates"]):
        try:
            modules.append(load_candidate(scratch / cand["file"], name=f"wf_candidate_{i}", sha256=cand.get("sha256")))
        except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
            return {"error": error_info(exc, "import"), "which": i}
        # taken before the next import: replacing it is caught below (a ModelNew's class, likewise)
        launches.append(getattr(modules[-1], "ModelNew" if cand.get("model_new") else "launch"))
    prepared = []
    training = bool(req.get("training"))
    grads: list[Any] = []  # per case, the upstream gradient of a training A/B (None otherwise)
    for case in req["cases"]:
        sets = [_inputs(task, case, seed, device) for seed in case["seeds"]]
        prepared.append((sets, tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0])))
        grads.append(_grad_out(task, sets[0], case["grad_seed"], device) if training else None)
    samples: list[list[list[float]]] = [[[] for _ in req["cases"]] for _ in modules]
    rounds = int(req["rounds"])
    try:
        # per candidate and case: launch, or a ModelNew whose state shares the case's refilled work buffers
        calls = [
            [entry_for(m, c).bind(work, case) for case, (_, work) in zip(req["cases"], prepared)]
            for m, c in zip(modules, req["candidates"])
        ]
        mark("compile")
        for i, module in enumerate(modules):
            for k, (call, args) in enumerate(calls[i]):
                call(*args, **req["candidates"][i]["params"])
                if grads[k] is not None:
                    forward_backward(module, prepared[k][1], grads[k], req["candidates"][i]["params"])
        sync(device)
        mark("ab")
        for r in range(-int(req.get("warmup", 2)), rounds):
            order = range(len(modules)) if r % 2 == 0 else reversed(range(len(modules)))
            for i in order:
                params = req["candidates"][i]["params"]
                for k, (case, (sets, work)) in enumerate(zip(req["cases"], prepared)):
                    _refill(work, sets, case["perturb"][max(r, 0)])
                    if grads[k] is not None:  # objective of a training variant: forward + backward
                        t_f, t_b, _, out = timed_training(timer, modules[i], work, grads[k], params)
                        t = t_f + t_b
                    else:
                        call, args = calls[i][k]
                        t, _, out = timer.time(lambda call=call, args=args, params=params: call(*args, **params))
                    if r >= 0:
                        samples[i][k].append(t)
                    if r == rounds - 1:
                        _save_outputs(out, scratch / f"timed_ab_{i}_{case['id']}.pt")
                    del out
    except BaseException as exc:  # noqa: BLE001 - any failure of the interleaved calls is reported
        return {"error": error_info(exc, "ab")}
    entries = ["ModelNew" if c.get("model_new") else "launch" for c in req["candidates"]]
    tampered = watch.tampered() + [
        f"wf_candidate_{i}.{entries[i]}" for i, m in enumerate(modules) if getattr(m, entries[i]) is not launches[i]
    ]
    return {
        "samples": samples,
        "tampered": tampered,
        "threads": watch.new_threads(),
        "state_changed": watch.state_changed(),
    }


def _device_info(device: str) -> dict[str, Any]:
    import triton

    if not device.startswith("cuda"):
        return {"name": "cpu", "triton": triton.__version__}
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "memory": props.total_memory,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
    }
