"""Reading a variant's text within limits, before anything else looks at it.

Both the variant loader (kernels/variant.py reads TASK and SPACE) and the evaluator's grammar
(evaluator/static/grammar/) parse candidate text; both go through :func:`parse_limited`, so a huge, deep or
non-UTF-8 source is refused the same way everywhere, and a parser failure is a :class:`SourceRefused`
with a rule name, never a ``RecursionError`` reaching a user. It lives in ``kernels`` because the
loader is here and the evaluator depends on kernels, not the other way round.

Example::

    >>> try:
    ...     parse_limited("x = " + "-" * 5000 + "1")
    ... except SourceRefused as err:
    ...     print(err.reason)
    source_too_deep
"""

from __future__ import annotations

import ast
import re
import threading

# The largest template is 4.6 KB and 130 lines; 64 KiB / 2000 lines leaves room for long honest
# kernels and keeps a 2 MB source of statements from costing the orchestrator a parse (measured:
# parsing 2 MB of statements grew it by ~1 GB).
MAX_BYTES = 64 * 1024
MAX_LINES = 2000
# Templates' deepest AST is 16 levels; CPython's parser itself fails near 200 nested parentheses and
# with a RecursionError/MemoryError on ~100k unary operators or a long chain of attributes.
MAX_DEPTH = 60
MAX_NODES = 30_000

COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)


class SourceRefused(Exception):
    """The text breaks a source rule: ``reason`` is the rule (source_encoding, source_too_large,
    source_too_deep, syntax_error), the message says what to fix."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _fail(reason: str, message: str) -> SourceRefused:
    return SourceRefused(reason, message)


def check_source_text(source: str, cookie: bool = True) -> None:
    """[source_encoding] and [source_too_large]: the text itself, before any parse (``cookie``: check the
    coding cookie too; kernels/variant.py reads TASK and SPACE from a text whose cookie the grammar
    judges later, as a verdict)."""
    try:
        data = source.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("source_encoding", "the source is not valid UTF-8 text (lone surrogates)") from None
    if len(data) > MAX_BYTES or source.count("\n") > MAX_LINES:
        raise _fail(
            "source_too_large",
            f"the source has {len(data)} bytes and {source.count(chr(10)) + 1} lines; "
            f"a variant may have at most {MAX_BYTES} bytes and {MAX_LINES} lines",
        )
    # Python's own lines: str.splitlines() also splits at \x0c, \x0b, \x1c-\x1e, \x85 and \u2028, so
    # "# x\x0c\n# coding: utf-7" hid Python's line 2 (its cookie) behind an empty third "line".
    for line in re.split(r"\r\n|\r|\n", source, maxsplit=2)[:2] if cookie else []:
        found = COOKIE.match(line)
        if found and found.group(1).lower().replace("_", "-") not in ("utf-8", "utf8"):
            raise _fail(
                "source_encoding",
                f"coding cookie '{found.group(1)}': a variant is UTF-8 only (the checker "
                "and the importer must read the same text)",
            )


# CPython 3.11's conversion of a parsed tree into ast objects keeps its recursion depth in per-interpreter state:
# two threads parsing at once can fail with "SystemError: AST constructor recursion depth mismatch" (the in-process
# pool runs several worker threads). Every parse on an evaluation's path takes this lock.
PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` under :data:`PARSE_LOCK` (safe from several threads)."""
    with PARSE_LOCK:
        return ast.parse(source, filename=filename)


def parse_limited(source: str, cookie: bool = True) -> ast.Module:
    """Parse within the limits; every failure is a SourceRefused, never an exception of the parser."""
    check_source_text(source, cookie)
    try:
        tree = parse(source)
    except SyntaxError as exc:
        raise _fail("syntax_error", f"line {exc.lineno or 1}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise _fail(
            "source_too_deep", f"the parser gave up ({type(exc).__name__}): the source nests too deeply"
        ) from None
    depth, nodes = _measure(tree)
    if depth > MAX_DEPTH or nodes > MAX_NODES:
        raise _fail(
            "source_too_deep",
            f"the syntax tree is {depth} levels deep with {nodes} nodes; at most "
            f"{MAX_DEPTH} levels and {MAX_NODES} nodes",
        )
    return tree


def _measure(tree: ast.AST) -> tuple[int, int]:
    """(depth, node count) without recursion (a deep tree must not RecursionError the checker)."""
    stack = [(tree, 1)]
    depth = nodes = 0
    while stack:
        node, d = stack.pop()
        nodes += 1
        depth = max(depth, d)
        if nodes > MAX_NODES:
            break
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return depth, nodes
