"""The one place warpforge reaches into Optuna's private API, with the versions it was checked against.

Optuna promises nothing about these names; each is used for a measured reason:

- ``optuna.storages._rdb.models``: the in-memory studies are copied into Optuna's own tables in bulk
  (search/engine/mirror.py), 29-53 ms per evaluation less than RDBStorage in the loop;
- ``optuna._gp`` (``acqf``, ``gp``, ``prior``): the GP arm scores the explicit feasible set with Optuna's own
  regressor and log EI (search/samplers/gp_arm.py); the API changed between 4.x and 5.0;
- ``TPESampler._parzen_estimator_cls`` / ``_parzen_estimator_parameters``: the TPE arm's density ratio over
  the feasible set (search/samplers/registry.py);
- ``FrozenTrial._trial_id``, ``Study._study_id``, ``Study._storage`` and ``InMemoryStorage._get_trial``: system
  attributes set on a trial while the sampler proposes it (which arm, which repair), and the mirror's
  bookkeeping of which trial was copied where.

When the installed Optuna is not one of ``CHECKED``, :func:`check_version` logs one note; the model arms then
mark themselves broken on the first error and the portfolio's other arms take their turns
(tests/search/test_arms.py), and the mirror's own tests say whether the copy still holds.

Example:
    >>> version_checked("5.0.0"), version_checked("6.1.0")
    (True, False)
"""

from __future__ import annotations

import logging
from functools import lru_cache
from types import ModuleType
from typing import Any

import optuna

CHECKED = ("5.0",)  # major.minor versions of Optuna these private names were checked against
log = logging.getLogger("warpforge.search")


def version_checked(version: str) -> bool:
    return ".".join(version.split(".")[:2]) in CHECKED


@lru_cache(maxsize=1)
def check_version() -> bool:
    """True when the installed Optuna is one this module was checked against; else a note, once."""
    if version_checked(optuna.__version__):
        return True
    log.warning(
        "Optuna %s is not one warpforge checked its private API against (%s): the GP and TPE arms fall "
        "back to the others if it changed",
        optuna.__version__,
        ", ".join(CHECKED),
    )
    return False


def rdb_models() -> ModuleType:
    """Optuna's table definitions (``optuna.storages._rdb.models``)."""
    check_version()
    from optuna.storages._rdb import models

    return models


def gp_modules() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``optuna._gp``'s ``acqf``, ``gp`` and ``prior`` modules."""
    check_version()
    from optuna._gp import acqf, gp, prior

    return acqf, gp, prior


def parzen_estimator(tpe: optuna.samplers.TPESampler) -> tuple[Any, Any]:
    """The TPE sampler's Parzen estimator class and its parameters."""
    check_version()
    return tpe._parzen_estimator_cls, tpe._parzen_estimator_parameters


def storage_trial_id(trial: optuna.trial.FrozenTrial) -> int:
    """A trial's storage id (``FrozenTrial._trial_id``)."""
    return int(trial._trial_id)


def stored_trial(storage: optuna.storages.InMemoryStorage, trial_id: int) -> optuna.trial.FrozenTrial:
    """An in-memory storage's own trial object, not a copy (``InMemoryStorage._get_trial``)."""
    return storage._get_trial(trial_id)


def study_id(study: optuna.Study) -> int:
    """A study's storage id (``Study._study_id``)."""
    return int(study._study_id)


def set_trial_attr(study: optuna.Study, trial: optuna.trial.FrozenTrial, key: str, value: Any, *, system: bool) -> None:
    """Set an attribute on a trial the study's sampler is proposing, or one left running (no public API
    takes a FrozenTrial: ``Study._storage`` with ``FrozenTrial._trial_id``)."""
    setter = study._storage.set_trial_system_attr if system else study._storage.set_trial_user_attr
    setter(storage_trial_id(trial), key, value)


def study_system_attrs(study: optuna.Study) -> dict[str, Any]:
    return dict(study._storage.get_study_system_attrs(study._study_id))
