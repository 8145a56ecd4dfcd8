"""The child's ``check`` mode: run ``launch`` on inputs the trusted side sends and report raw facts.

For every case: ask the parent for that case's inputs (``need``; made from seeds this process never
sees, sent only after the candidate is imported and only once per case), prefill
fresh allocations with the case's sentinel, run ``launch`` under the operator recorder, and save the
outputs and the post-call inputs for the parent to compare against its float64 reference. Then, on one
case only (the cost of two extra launches, not a second check):

- ``rerun``: the same inputs with a different sentinel; outputs that depend on the sentinel were read
  from uninitialised memory or never written;
- ``ghost``: every Triton launch turned into a no-op; an output that is still right was not computed
  by the kernels.

Under the interpreter, cases alternate between Triton's grid order and a shuffled one (``grid``):
kernels whose programs depend on each other's order (races) fail one of them.

Facts reported per launch: output kinds, aliasing, torch operators called, Triton launches made (and
the source hash of each kernel), live threads left behind, harness functions replaced, the SHA-256 of
each saved file; per run: global numeric flags before and after.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path
from typing import Any

import torch

from warpforge.evaluator.sandbox.child import faithful, perturb, races
from warpforge.evaluator.sandbox.child.backward import training_call
from warpforge.evaluator.sandbox.child.common import (
    INTERPRET,
    LOAD,
    SAVE,
    KernelGate,
    OpRecorder,
    Sentinel,
    Watch,
    as_tuple,
    error_info,
    global_state,
    load_candidate,
    mark,
    need,
    sync,
)
from warpforge.evaluator.sandbox.child.grid import GridOrder
from warpforge.evaluator.sandbox.child.model_new import STATE_MISMATCH, StateMismatch, entry_for
from warpforge.evaluator.sandbox.child.races import Races


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


class _LaunchError(Exception):
    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info["message"])
        self.info = info


def _check_constraints(module: Any, params: dict[str, Any], shapes: list[dict[str, int]]) -> str | None:
    fn = getattr(module, "constraints", None)
    if fn is None:
        return None
    for shape in shapes:
        if not fn(dict(params), dict(shape)):
            return json.dumps(shape, sort_keys=True)
    return None


class _Runner:
    def __init__(self, req: dict[str, Any], scratch: Path, module: Any, gate: KernelGate, watch: Watch) -> None:
        self.req, self.scratch, self.module, self.gate, self.watch = req, scratch, module, gate, watch
        self.device: str = req["device"]
        self.sentinel = Sentinel()
        # On a GPU the first call of a shape compiles (seconds); it runs under the "compile" budget, on a
        # copy of the inputs, so the observed call runs under the parent's hang bound ("launch").
        self.warm = self.device.startswith("cuda")
        # A training check (request "training"): each case's inputs end with the upstream gradient, and the
        # observed call is launch + launch_forward + launch_backward (child/backward.py). Never a ModelNew:
        # a by-path task defines no gradients.
        self.training = bool(req.get("training"))
        self.entry = entry_for(module, req)  # launch, or a ModelNew built with the reference's state
        self.by_id = {case["id"]: case for case in req["cases"]}

    def bind(self, inputs: tuple[Any, ...], case_id: int) -> tuple[Any, tuple[Any, ...]]:
        try:
            return self.entry.bind(inputs, self.by_id[case_id])
        except StateMismatch as exc:
            raise _LaunchError({**error_info(exc, "state"), "kind": STATE_MISMATCH}) from None
        except BaseException as exc:  # noqa: BLE001 - ModelNew's __init__ is the candidate's
            raise _LaunchError(error_info(exc, "init")) from None

    def call(self, call: Any, args: tuple[Any, ...], params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        if self.training:
            return training_call(self.module, args, params)
        return call(*args, **params), {}

    def launch(self, case_id: int, sentinel: float, out_name: str, shuffled: bool = False) -> dict[str, Any]:
        inputs = LOAD(io.BytesIO(need(case=case_id, purpose=out_name)), weights_only=True)
        inputs = tuple(x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs)
        params = self.req["params"]
        if self.warm:
            mark("compile")
            copies = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
            call, args = self.bind(copies, case_id)
            try:
                self.call(call, args, params)
                sync(self.device)
                del copies, call, args
            except BaseException as exc:  # noqa: BLE001 - any failure of the candidate is reported
                raise _LaunchError(error_info(exc, "run")) from None
        call, args = self.bind(inputs, case_id)  # outside the recorder: building is not the answer's compute
        Sentinel.poison(inputs)
        self.sentinel.install(sentinel)
        recorder = OpRecorder(self.gate)
        calls_before = self.gate.calls
        self.gate.kernels.clear()
        self.gate.specs.clear()
        self.gate.refused.clear()
        GridOrder.shuffled = shuffled
        logged, raced = len(GridOrder.log), len(Races.found)
        mark("launch")
        start = time.perf_counter()
        try:
            with recorder:
                out, extra = self.call(call, args, params)
            sync(self.device)
            mark("launched")  # ends the candidate's "launch" budget: what follows is the harness's
        except BaseException as exc:  # noqa: BLE001 - any failure of the candidate's launch is reported
            raise _LaunchError(error_info(exc, "run")) from None
        finally:
            GridOrder.shuffled = False
        elapsed = time.perf_counter() - start
        outs = as_tuple(out)
        kinds = [type(o).__name__ if type(o) is not torch.Tensor else "Tensor" for o in outs]
        spans = [_span(x) for x in inputs if isinstance(x, torch.Tensor)]
        aliases = [
            type(o) is torch.Tensor and any(lo < _span(o)[1] and _span(o)[0] < hi for lo, hi in spans) for o in outs
        ]
        facts = {
            "kinds": kinds,
            "aliases": aliases,
            "seconds": elapsed,
            "ops": sorted(recorder.ops),
            "kernel_calls": self.gate.calls - calls_before,
            "threads": self.watch.new_threads(),
            "tampered": self.watch.tampered() + self.sentinel.tampered(),
            "state_changed": self.watch.state_changed(),
            "kernels": sorted(self.gate.kernels),
            "grid": "shuffled" if shuffled else "in order",
            "grids": GridOrder.log[logged:],
            "races": Races.found[raced:],
            **extra,
            "specs": list(self.gate.specs.values()),
            "refused_arguments": list(self.gate.refused),
        }
        if all(k == "Tensor" for k in kinds):
            buffer = io.BytesIO()
            SAVE(
                {
                    "out": [o.detach().to("cpu").clone() for o in outs],
                    "inputs_after": [
                        x.detach().to("cpu").clone() if isinstance(x, torch.Tensor) else x for x in inputs
                    ],
                },
                buffer,
            )
            data = buffer.getvalue()
            (self.scratch / out_name).write_bytes(data)
            facts["saved"] = out_name
            facts["sha256"] = hashlib.sha256(data).hexdigest()  # the parent checks it before judging
        return facts


def run_check(req: dict[str, Any], scratch: Path) -> dict[str, Any]:
    gate = KernelGate().install()
    if INTERPRET:
        try:  # fail closed: an interpreter this layer does not know is never judged
            GridOrder.install(int(req.get("grid_seed", 0)))
            faithful.install()
            races.install()
            perturb.install()
        except faithful.InterpreterLayout as exc:
            return {"error": error_info(exc, "interpreter")}
    if req["device"].startswith("cuda"):
        torch.cuda.init()  # before the snapshot: initialising CUDA is the harness's doing, not the candidate's
    watch = Watch()
    try:
        module = load_candidate(scratch / req["candidate"], sha256=req.get("candidate_sha256"))
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's
        return {"error": error_info(exc, "import")}
    mark("imported")  # only now does the parent send any case's inputs
    try:
        bad_shape = _check_constraints(module, req["params"], req["constraint_shapes"])
    except BaseException as exc:  # noqa: BLE001 - constraints() is the candidate's code
        return {"error": error_info(exc, "constraints")}
    if bad_shape is not None:
        return {"invalid_config": bad_shape}
    runner = _Runner(req, scratch, module, gate, watch)
    report: dict[str, Any] = {"cases": [], "state_before": watch.state}
    by_id = {case["id"]: case for case in req["cases"]}
    try:
        for case in req["cases"]:
            facts = runner.launch(
                case["id"], float(case["sentinel"]), f"out_{case['id']}.pt", bool(case.get("shuffled"))
            )
            report["cases"].append({"id": case["id"], **facts})
        rerun = req.get("rerun")
        if rerun:
            facts = runner.launch(
                by_id[rerun["case"]]["id"],
                float(rerun["sentinel"]),
                "out_rerun.pt",
                bool(by_id[rerun["case"]].get("shuffled")),
            )
            report["rerun"] = {"case": rerun["case"], **facts}
        perturbed = req.get("perturbed")
        if perturbed:  # the pair's case again under the judge's seeds of perturbed arithmetic (child/perturb.py)
            case = by_id[perturbed["case"]]
            report["perturbed"] = []
            for i, seed in enumerate(perturbed["seeds"]):
                perturb.Perturb.start(int(seed))
                try:
                    facts = runner.launch(
                        case["id"], float(case["sentinel"]), f"out_perturbed_{i}.pt", bool(case.get("shuffled"))
                    )
                finally:
                    perturb.Perturb.stop()
                report["perturbed"].append({"case": perturbed["case"], "seed": int(seed), **facts})
    except _LaunchError as err:
        report["error"] = err.info
        return report
    ghost = req.get("ghost")
    if ghost:
        gate.ghost = True
        try:
            facts = runner.launch(by_id[ghost["case"]]["id"], float(ghost["sentinel"]), "out_ghost.pt")
            report["ghost"] = {"case": ghost["case"], **facts}
        except _LaunchError as err:  # without its kernels the candidate failed: the kernels mattered
            report["ghost"] = {"case": ghost["case"], "error": err.info, "kernel_calls": None}
        finally:
            gate.ghost = False
    report["state_after"] = global_state()
    report["state_changed_end"] = watch.state_changed()
    report["threads_end"] = watch.new_threads()
    report["tampered_end"] = watch.tampered() + runner.sentinel.tampered()
    return report
