"""The agent: proposers (the template library; the LLM in ``evolution``). Importing the package registers them.

Example::

    >>> from warpforge.agent.proposers import PROPOSERS
    >>> sorted(PROPOSERS)[:2]
    ['llm', 'template']
"""

from warpforge.agent import evolution as _evolution  # noqa: F401 - registers the "llm" proposer
