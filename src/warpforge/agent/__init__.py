"""The agent: proposers (``proposers``: the registry and the template library; ``evolution``: the LLM).

Kept empty on purpose: ``warpforge agent ...`` imports ``warpforge.cli.agent`` at every CLI start, and the
proposers pull in torch (~2 s); the campaign imports ``warpforge.agent.evolution``, which registers ``llm``.
"""
