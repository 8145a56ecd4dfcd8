"""The trust boundary: spawned child processes that run candidate code, and what crosses back.

``supervisor`` starts and watches a child (``ChildPool``); ``isolation`` wraps it in bubblewrap; ``child/`` is
everything that runs inside the candidate's process (and nothing trusted runs there); ``protocol`` types the
request and report that cross; ``readback`` caps what the trusted side reads from a scratch directory;
``kernel_cache`` hands a child the kernels compiled ahead of it.
"""
