"""Planner errors: one-line messages that say what to do next, each with the CLI exit code it maps to.

Example::

    >>> from warpforge.parallel.errors import SpecError
    >>> SpecError("unknown model 'x'").exit_code
    2
"""

from __future__ import annotations

from warpforge.errors import UsageError, WarpforgeError


class PlannerError(WarpforgeError):
    """Base class; ``exit_code`` is 1 (a failure) unless the input itself was wrong."""

    exit_code = 1


class SpecError(PlannerError, UsageError):
    """A bad model/cluster spec, preset name or plan (a usage error: exit code 2)."""

    exit_code = 2


class InvalidPlanError(SpecError):
    """A plan that violates divisibility or topology rules (e.g. heads not divisible by TP)."""


class NoFeasiblePlanError(PlannerError):
    """The search found no plan that fits in memory (a failure: exit code 1)."""
