"""The evaluator: one candidate in, exactly one verdict out, decided where candidate code never runs.

Its parts, in the order an evaluation meets them:

- ``static/``: the variant grammar and checks on the exact bytes, AST only, before anything runs;
- ``sandbox/``: the trust boundary: ``supervisor`` starts each child in the OS sandbox, ``child/`` is all
  that runs beside the candidate (untrusted), ``protocol`` types what crosses back;
- ``run/``: backends (``interpret``, ``cuda``, ``replay``), worker pools, and the stages a job goes through;
- ``judge/``: every verdict, from a dead child's reported facts and saved outputs, against float64 references.

``result`` holds the verdicts and results every other package reads; ``gpus`` the peak rates behind the
speed-of-light floor.
"""
