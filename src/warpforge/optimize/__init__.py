"""``warpforge optimize``: a whole model in, a faster model out (docs/optimize.md).

``target`` loads what the user brings; ``trace`` prices one step op by op; ``regions`` cuts it into regions
and ``match`` finds the built-in task each computes; ``flow`` budgets, searches, exports and patches
(``patching``) and has ``prove`` check the patched model in its own process; ``report`` is what it says.
"""
