"""Static checks on a variant's exact bytes, in the trusted process, before any candidate code runs.

``grammar`` is the allowlist a variant module must fit (what each kind of statement may contain); ``checks``
runs it and the source limits on a file; ``vocab`` holds the names both share and the agent's prompt states.
Nothing here imports or executes candidate code: it reads the AST only.
"""
