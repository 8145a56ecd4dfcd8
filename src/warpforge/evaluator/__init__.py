"""The evaluator: one candidate in, exactly one verdict out, decided where candidate code never runs.

Its parts, in the order an evaluation meets them:

- ``static/``: the variant grammar and checks on the exact bytes, AST only, before anything runs;
- ``sandbox/``: the trust boundary: ``supervisor`` starts each child in the OS sandbox, ``child/`` is all
  that runs beside the candidate (untrusted), ``protocol`` types what crosses back;
- ``run/``: backends (``interpret``, ``cuda``, ``replay``), worker pools, and the stages a job goes through;
- ``judge/``: every verdict, from a dead child's reported facts and saved outputs, against float64 references.

``result`` holds the verdicts and results every other package reads; ``gpus`` the peak rates behind the
speed-of-light floor.

The order is a contract (tests/evaluator/test_evaluation_trace.py traces it). Counting as an entry each call
that ``run/`` makes into another part (what that part then calls is inside the entry), an evaluation enters
``static`` once and first, before anything of the candidate runs; then the sandbox and the judge alternate
in phases: each sandbox stretch starts at least one child and reads what it left, each judge stretch works
on finished children and decides whether another child runs (the task lint and the check's cases before the
check child; the check's verdict before the late compile of interpreted specializations, or before the timed
child on a GPU). So the interpret backend is static, sandbox (compile), judge (lint, cases), sandbox (check),
judge (verdict). The contract module ``run/backend.py`` only dispatches (stages.evaluate_job): nothing in it
is called back while the stages run.
"""
