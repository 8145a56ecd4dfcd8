"""Running an evaluation: backends, worker pools, and the stages each job goes through.

``backends`` holds the backend contract, its registry and the built-in backends; ``stages`` runs static
check, correctness, ahead-of-time compile and timing for a ``Job``; ``pool`` and ``ray_pool`` schedule jobs;
``timing`` and ``stats`` plan and judge timed runs; ``replay`` answers from recorded GPU measurements.
"""
