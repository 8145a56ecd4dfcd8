"""Everything that runs inside the candidate's sandboxed process, and nothing else.

The trusted side (sandbox/supervisor.py, stages.py, judge/judge.py, timing.py) never imports these modules' code
paths that touch candidate code; it starts ``python -I -c <boot>`` which runs ``child/__main__.py``
inside the OS sandbox (isolation.py). Anything here can be read, patched or forged by a candidate
that knows this code: it reports facts, and the trusted side re-checks what it can (outputs against
its own float64 reference, output hashes, its own clock, its own seeds).
"""
