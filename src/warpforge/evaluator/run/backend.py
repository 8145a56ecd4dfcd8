"""The backend contract: :class:`Backend` with its declared capabilities, its registry, and backend selection.

A backend evaluates a :class:`~warpforge.evaluator.sandbox.job.Job` to exactly one verdict and declares, as
class attributes, what else it offers (see :class:`Backend`). :meth:`Backend.evaluate` only dispatches to the
run stages (stages.evaluate_job), which call the backend's ``_evaluate``; nothing here is called back.
:data:`BACKENDS` names the built-in ones by import path (``interpret``, ``cuda``, ``replay``, each in its own
module), so any process finds every built-in whatever it imported first, and this module never imports its
implementations: they import it.
:func:`usable_backend` picks the backend that can evaluate a task here, before the first evaluation.

Example::

    >>> sorted(BACKENDS)
    ['cuda', 'interpret', 'replay']
    >>> BACKENDS["interpret"].measures, BACKENDS["cuda"].uses_gpu
    (False, True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import torch

from warpforge.errors import UsageError
from warpforge.evaluator.result import EvalResult
from warpforge.evaluator.run import recordings
from warpforge.evaluator.run.stages import evaluate_job
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.variant import Variant
from warpforge.registry import Registry


class Backend(ABC):
    """Evaluates a :class:`Job` to exactly one verdict, and declares what else it offers.

    The pool and the campaign read only these class attributes (never ``getattr`` probes); each says
    "not supported" unless a backend declares otherwise:

    - ``measures``: produces times that may rank configurations (``interpret``: no);
    - ``uses_gpu``: times on a GPU, so one worker per GPU and never two timings on one device, with CPU
      compile workers ahead of it (Ray pool);
    - ``live_timing``: running again gives fresh times (so the campaign's final top-k is re-measured;
      recorded times cannot change);
    - ``can_remeasure``: offers :meth:`remeasure`, interleaved A/B timing of two candidates (what the
      beyond-noise acceptance prefers);
    - ``has_precheck``: its own CPU stage (:meth:`precheck`) replaces the pool's default one (static
      check and ahead-of-time compile) ahead of the GPU.
    """

    name: ClassVar[str] = ""
    measures: ClassVar[bool] = False
    uses_gpu: ClassVar[bool] = False
    live_timing: ClassVar[bool] = False
    can_remeasure: ClassVar[bool] = False
    has_precheck: ClassVar[bool] = False

    def __init__(self, pool: ChildPool | None = None) -> None:
        self.pool = pool or ChildPool()
        self._owns_pool = pool is None

    @abstractmethod
    def _evaluate(self, job: Job) -> EvalResult: ...

    def evaluate(self, job: Job) -> EvalResult:
        """Dispatch only: the run stages check ``job`` statically, call :meth:`_evaluate` and stamp the result
        (stages.evaluate_job), and nothing of this module runs again until they return."""
        return evaluate_job(job, self.name, self._evaluate)

    def precheck(self, job: Job) -> EvalResult:
        """The backend's own CPU stage (``has_precheck``); not supported by default."""
        raise NotImplementedError(f"the {self.name} backend has no precheck of its own (has_precheck=False)")

    def remeasure(self, job_a: Job, job_b: Job) -> tuple[list[float], list[float]]:
        """Interleaved A/B samples (ms) of two checked candidates (``can_remeasure``); not supported by default."""
        raise NotImplementedError(f"the {self.name} backend cannot re-measure (can_remeasure=False)")

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()


BACKENDS: Registry[type[Backend]] = Registry(
    "backend",
    {
        "interpret": "warpforge.evaluator.run.interpret:InterpretBackend",
        "cuda": "warpforge.evaluator.run.cuda:CudaBackend",
        "replay": "warpforge.evaluator.run.replay:ReplayBackend",
    },
)
register = BACKENDS.register  # class decorator: make a Backend subclass available as ``--backend NAME``


def resolve_backend_name(name: str, task_name: str | None = None) -> str:
    """``auto``: a live GPU when there is one, else recorded GPU times when they exist, else interpret."""
    if name != "auto":
        if name not in BACKENDS:
            raise UsageError(f"unknown backend {name!r}: choose from auto, {', '.join(sorted(BACKENDS))}")
        return name
    if torch.cuda.is_available():
        return "cuda"
    if task_name is not None and recordings.has_recordings(task_name):
        return "replay"
    return "interpret"


def get_backend(
    name: str = "auto", task_name: str | None = None, pool: ChildPool | None = None, **kwargs: object
) -> Backend:
    return BACKENDS[resolve_backend_name(name, task_name)](pool=pool, **kwargs)


class BackendUnavailable(UsageError):
    """The backend asked for cannot evaluate here; the message says what to use instead (a usage error)."""


def usable_backend(name: str, task_name: str, variants: Sequence[Variant] | None = None) -> str:
    """The backend that will evaluate ``task_name`` here, checked before the first evaluation.

    ``auto``: cuda with a GPU, else replay when recorded times exist for one of ``variants`` (their exact
    sources; any of the task's when None), else interpret, so it never picks a backend that can only answer
    ``unsupported``. An explicit cuda without a GPU, or replay without such recordings, raises
    :class:`BackendUnavailable` naming what to run instead.

    Example::

        >>> usable_backend("auto", "softmax", builtin_variants("softmax"))  # doctest: +SKIP
        'interpret'
    """
    has_recordings, recordings_root = recordings.has_recordings, recordings.recordings_root

    def recorded() -> bool:
        if variants is None:
            return has_recordings(task_name)
        root = recordings_root()  # recordings.py's layout: <gpu>/<task>/<variant>-<hash[:12]>/*.json.gz (not read here)
        return any(any(root.glob(f"*/{task_name}/{v.name}-{v.source_hash[:12]}/*.json.gz")) for v in variants)

    resolved = resolve_backend_name(name, task_name)  # unknown names: ValueError naming the choices
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "replay" if "replay" in BACKENDS and recorded() else "interpret"
    if resolved == "cuda" and not torch.cuda.is_available():
        alt = "--backend replay (recorded GPU times) or " if recorded() else ""
        raise BackendUnavailable(
            f"--backend cuda needs a CUDA GPU and torch sees none here: use {alt}--backend interpret (correctness "
            "in the Triton interpreter plus compile facts, no times), or run on a GPU machine"
        )
    if resolved == "replay" and not recorded():
        names = ", ".join(v.name for v in variants or [])
        which = f" (variant{'s' if len(variants or []) > 1 else ''} {names})" if names else ""
        raise BackendUnavailable(
            f"--backend replay has no recorded GPU times for {task_name!r}{which} under {recordings_root()}: use "
            "--backend interpret here, record on a GPU with benchmarks/record_spaces.py, or point "
            "WARPFORGE_RECORDINGS at a folder of recordings"
        )
    return resolved
