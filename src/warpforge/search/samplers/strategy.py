"""Ask/tell over one Optuna study on an explicit :class:`SearchSpace` (what the campaign engine drives).

The study stays the store of trials (in memory or in the campaign's RDBStorage). Each parameter is
stored as its ordinal index (``IntDistribution(0, n-1)``) so that samplers see the order of the
candidates; the real values are kept beside it in the trial's user attr ``config``.

Example:
    >>> from warpforge.search.samplers.space import SearchSpace
    >>> space = SearchSpace.enumerate({"block": [32, 64, 128], "warps": [4, 8]})
    >>> s = Strategy(space, make_study("demo", None, "random", seed=0), "random", seed=0)
    >>> p = s.ask(); s.tell(p, 1.5); s.n_told, s.best[1]
    (1, 1.5)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.storages import BaseStorage
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from warpforge.search.optuna_private import set_trial_attr
from warpforge.search.samplers.registry import (
    ARM_ATTR,
    DEFAULT_SAMPLER,
    REPAIR_ATTR,
    Context,
    Policy,
    UniformArm,
    make_policy,
    newer_policy_note,
    ordinal_distributions,
    resolve_sampler,
)
from warpforge.search.samplers.space import SearchSpace

log = logging.getLogger("warpforge.search")
CONFIG_ATTR = "config"  # user attr: the configuration's real values (the params are ordinal indices)
SAMPLER_ATTR = "wf:sampler"  # study user attr: the versioned registry name the study was created with


@dataclass
class Proposal:
    """A configuration to evaluate: the asked trial and its real parameter values."""

    trial: optuna.trial.Trial
    params: dict[str, Any]


class FeasibleSampler(BaseSampler):
    """Optuna sampler that returns, through ``sample_relative``, a policy's feasible unseen choice.

    ``n_proposals``/``n_infeasible``/``n_duplicate`` count how often the wrapped sampler's raw
    proposal had to be repaired (the proposals it would have wasted without this layer).
    """

    def __init__(self, space: SearchSpace, policy: Policy, seed: int | None = None) -> None:
        self.space = space
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self._dists = ordinal_distributions(space)
        self.n_proposals = 0
        self.n_infeasible = 0
        self.n_duplicate = 0
        self._done = _Finished(len(space))

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {k: d for k, d in self._dists.items() if not d.single()}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        ctx = self.context(study, trial)
        pick = self.policy.propose(ctx)
        if pick is None:
            pick = UniformArm().propose(ctx)
        if pick is None:
            raise optuna.exceptions.OptunaError("search space exhausted")  # Strategy checks first
        self.n_proposals += 1
        self.n_infeasible += pick.repair == "infeasible"
        self.n_duplicate += pick.repair == "duplicate"
        set_trial_attr(study, trial, ARM_ATTR, pick.arm, system=True)
        if pick.repair:
            set_trial_attr(study, trial, REPAIR_ATTR, pick.repair, system=True)
        index = self.space.to_index(self.space.feasible[pick.row])
        return {k: int(i) for k, i in zip(self.space.params, index) if k in search_space}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        # Reached only for parameters outside the space (not produced by Strategy).
        return optuna.samplers.RandomSampler().sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        for s in self.policy.optuna_samplers():
            s.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        for s in self.policy.optuna_samplers():
            s.after_trial(study, trial, state, values)

    def row_of(self, trial: FrozenTrial) -> int | None:
        """Row of a trial's configuration (from its params, or its queued fixed params)."""
        params = trial.params if trial.params else trial.system_attrs.get("fixed_params", {})
        try:
            index = [int(params[k]) if k in params else 0 for k in self.space.params]
            if any(k not in params and not d.single() for k, d in self._dists.items()):
                return None
            return self.space.row(self.space.from_index(index))
        except (IndexError, KeyError, TypeError, ValueError):
            return None

    def context(self, study: Study, trial: FrozenTrial) -> Context:
        """What the policy sees: every other trial's row (``seen``) and the finished ones' outcomes, in
        trial order. Finished trials never change, so the leading run of them is folded in once and kept
        (recomputing it cost ~10 us a trial: 50 ms per ask at 5,000 trials); only the rest is read again."""
        trials = study.get_trials(deepcopy=False)
        done = self.fold(trials)
        seen = done.seen.copy()
        rows, values, failed, arms = list(done.rows), list(done.values), list(done.failed), list(done.arms)
        for t in trials[done.count :]:
            if t.number == trial.number:
                continue
            row = self.row_of(t)
            if row is None:
                continue
            seen[row] = True
            if t.state.is_finished():
                rows.append(row)
                values.append(_value(t))
                failed.append(_failed(t))
                arms.append(_arm(t))
        return Context(self.space, study, trial, seen, rows, values, failed, arms, self.rng)

    def fold(self, trials: list[FrozenTrial]) -> _Finished:
        """Fold the leading finished trials into the kept context (Strategy calls it once on a loaded study)."""
        done = self._done
        while done.count < len(trials) and trials[done.count].state.is_finished():
            t = trials[done.count]
            done.count += 1
            done.add(self.row_of(t), t)
        return done


class _Finished:
    """The context entries of a study's leading finished trials (see :meth:`FeasibleSampler.context`)."""

    def __init__(self, n: int) -> None:
        self.count = 0  # how many leading trials are folded in
        self.seen = np.zeros(n, dtype=bool)
        self.rows: list[int] = []
        self.values: list[float | None] = []
        self.failed: list[bool] = []
        self.arms: list[str] = []

    def add(self, row: int | None, t: FrozenTrial) -> None:
        if row is None:
            return
        self.seen[row] = True
        self.rows.append(row)
        self.values.append(_value(t))
        self.failed.append(_failed(t))
        self.arms.append(_arm(t))


def _value(t: FrozenTrial) -> float | None:
    return t.value if t.state == TrialState.COMPLETE else None


def _failed(t: FrozenTrial) -> bool:
    return t.state == TrialState.FAIL and not t.user_attrs.get("interrupted")


def _arm(t: FrozenTrial) -> str:
    return str(t.system_attrs.get(ARM_ATTR, ""))


def make_study(
    name: str, storage: str | BaseStorage | None, sampler: str = DEFAULT_SAMPLER, seed: int | None = None
) -> optuna.Study:
    """Create, or load when it exists, a minimising study; ``sampler`` is validated and recorded.

    The space-aware sampler is installed by :class:`Strategy`, which knows the space; until then the
    study carries Optuna's RandomSampler.

    Example:
        >>> make_study("s", None, "tpe").direction.name
        'MINIMIZE'
    """
    recorded = resolve_sampler(sampler)  # fail early on an unknown name; wf-default -> wf-default@<current>
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=seed),
        load_if_exists=True,
    )
    if SAMPLER_ATTR not in study.user_attrs:  # a loaded study keeps the policy it was created with
        study.set_user_attr(SAMPLER_ATTR, recorded)
    return study


class Strategy:
    """Drives one ``optuna.Study`` with ask/tell over a :class:`SearchSpace`.

    ``ask`` only returns feasible configurations never asked before in this study (finished trials
    loaded from storage included); ``tell`` records values, failures (``TrialState.FAIL``: the
    policy treats them as information) and unmeasured evaluations (``PRUNED`` with user attr
    ``unmeasured``), so nothing evaluated is ever proposed again.
    """

    def __init__(
        self, space: SearchSpace, study: optuna.Study, sampler: str = DEFAULT_SAMPLER, seed: int | None = None
    ) -> None:
        if len(space) == 0:
            raise ValueError("the search space has no feasible configuration")
        self.space = space
        self.study = study
        # The study's own record wins: a resumed study goes on with the policy version it started with.
        self.sampler_name = str(study.user_attrs.get(SAMPLER_ATTR, sampler))
        note = newer_policy_note(self.sampler_name)
        if note is not None:
            log.warning("%s: %s", study.study_name, note)
        self.sampler = FeasibleSampler(space, make_policy(self.sampler_name, seed), seed)
        study.sampler = self.sampler
        self._dists = ordinal_distributions(space)
        self._told_rows: set[int] = set()
        self._best: tuple[int, float] | None = None
        self._running: dict[int, int | None] = {}  # asked, not told: trial number -> row
        loaded = study.get_trials(deepcopy=False)
        self.sampler.fold(loaded)  # now, not in the first ask: 160 ms for a study of 5,000 trials
        for t in loaded:
            if t.state == TrialState.RUNNING:
                self._running[t.number] = self.sampler.row_of(t)
            if t.state.is_finished():
                self._record(t.number, self.sampler.row_of(t), t.value if t.state == TrialState.COMPLETE else None)

    # --- the interface ----------------------------------------------------------------------------
    def recover(self) -> int:
        """Mark trials left RUNNING (a crash) as FAIL with user attr ``interrupted`` and re-propose them first.

        Returns how many were re-queued. Call once after loading a study, before the first ``ask``.
        """
        n = 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            row = self.sampler.row_of(t)
            set_trial_attr(self.study, t, "interrupted", True, system=False)
            self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            self._running.pop(t.number, None)
            if row is not None and row not in self._told_rows:
                index = self.space.to_index(self.space.feasible[row])
                self.study.enqueue_trial(dict(zip(self.space.params, index)), user_attrs={"requeued_from": t.number})
                n += 1
        return n

    def ask(self) -> Proposal | None:
        """The next feasible, never-told configuration, or None when the space is exhausted."""
        if len(self._told_rows) + self._outstanding() >= len(self.space):
            return None
        trial = self.study.ask()
        index = [trial.suggest_int(name, d.low, d.high) for name, d in self._dists.items()]
        params = self.space.as_dict(self.space.from_index(index))
        trial.set_user_attr(CONFIG_ATTR, _jsonable(params))
        self._running[trial.number] = self.space.row(params)
        return Proposal(trial, params)

    def tell(
        self, proposal: Proposal, value: float | None, *, failed: bool = False, attrs: dict[str, Any] | None = None
    ) -> None:
        """Record an evaluation: a value (ms, minimised), a failure, or unmeasured (value None)."""
        trial = proposal.trial
        for k, v in (attrs or {}).items():
            trial.set_user_attr(k, _jsonable(v))
        row = self.space.row(proposal.params)
        if failed:
            trial.set_user_attr("failed", True)
            self.study.tell(trial, state=TrialState.FAIL)
            value = None
        elif value is None:
            trial.set_user_attr("unmeasured", True)
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, float(value))
        self._running.pop(trial.number, None)
        self._record(trial.number, row, value)

    def adopt(
        self, params: dict[str, Any], value: float | None, *, failed: bool = False, attrs: dict[str, Any] | None = None
    ) -> bool:
        """Record an evaluation the study never heard of (stored, then the process died before its trial
        reached the study's database); False when the configuration is already told or outside the space."""
        row = self.space.row(params)
        if row is None or row in self._told_rows:
            return False
        config = self.space.feasible[row]
        index = self.space.to_index(config)
        state = TrialState.FAIL if failed else (TrialState.PRUNED if value is None else TrialState.COMPLETE)
        user_attrs = {
            CONFIG_ATTR: _jsonable(self.space.as_dict(config)),
            "adopted": True,
            **{k: _jsonable(v) for k, v in (attrs or {}).items()},
        }
        if failed:
            user_attrs["failed"] = True
        elif value is None:
            user_attrs["unmeasured"] = True
        self.study.add_trial(
            optuna.trial.create_trial(
                state=state,
                value=float(value) if state == TrialState.COMPLETE and value is not None else None,
                params={k: int(i) for k, i in zip(self.space.params, index)},
                distributions=dict(self._dists),
                user_attrs=user_attrs,
            )
        )
        self._record(-1, row, value if state == TrialState.COMPLETE else None)
        return True

    @property
    def best(self) -> tuple[dict[str, Any], float] | None:
        """Best measured configuration and its value, or None before the first measurement."""
        if self._best is None:
            return None
        return self.space.as_dict(self.space.feasible[self._best[0]]), self._best[1]

    @property
    def n_told(self) -> int:
        """Distinct configurations evaluated in this study (failures and unmeasured ones included)."""
        return len(self._told_rows)

    # --- helpers ---------------------------------------------------------------------------------
    def _record(self, number: int, row: int | None, value: float | None) -> None:
        if row is None:
            return
        self._told_rows.add(row)
        if value is not None and (self._best is None or value < self._best[1]):
            self._best = (row, float(value))

    def _outstanding(self) -> int:
        """Distinct configurations asked (RUNNING) and not yet told.

        Re-queued (WAITING) trials are not counted: they are still to be asked, and ``study.ask``
        serves them first. Kept as asks and tells happen: scanning the study cost ~1 ms per 5,000 trials.
        """
        rows = set(self._running.values())
        return len({r for r in rows if r is not None} - self._told_rows)


def _jsonable(value: Any) -> Any:
    """Values Optuna's storages accept (they JSON-encode user attrs): numpy scalars become Python ones."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
