"""The ``strict`` rule set's vocabulary, as the agent's system prompt states it (agent/prompting.py reads
these names): every set here is the variant grammar's own (evaluator/static/grammar.py, where the rules live).

The blocklist rules that used to be here were replaced by the grammar (issue 26): an allowlist of what a
variant module may contain, checked on the exact bytes that run.

Example::

    >>> "numpy" in ALLOWED_IMPORTS
    False
"""

from __future__ import annotations

from warpforge.evaluator.static.grammar import (
    DYNAMIC_CALLS,
    FORBIDDEN_NAMES,
    HOST_READS,
    IMPORTS,
    JIT_BANNED_ATTRS,
    JIT_BANNED_NODES,
    JIT_BUILTINS,
    JIT_MODULES,
    TRITON_CALLS,
)

ALLOWED_IMPORTS = tuple(sorted(name for name, _ in IMPORTS)) + ("__future__",)
ALLOWED_TRITON = TRITON_CALLS | {"jit", "language"}

__all__ = ["ALLOWED_IMPORTS", "ALLOWED_TRITON", "DYNAMIC_CALLS", "FORBIDDEN_NAMES", "HOST_READS", "JIT_BANNED_ATTRS",
           "JIT_BANNED_NODES", "JIT_BUILTINS", "JIT_MODULES"]
