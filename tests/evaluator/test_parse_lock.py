"""Every parse of a variant's text takes one lock: CPython 3.11 keeps the ast constructor's recursion depth in
per-interpreter state, so two worker threads of the in-process pool parsing at once can fail with "SystemError:
AST constructor recursion depth mismatch" and lose an honest evaluation as ``crashed: worker_error``."""

from __future__ import annotations

import threading

from warpforge.kernels.source_limits import PARSE_LOCK, parse_limited


def test_a_parse_waits_while_another_thread_holds_the_lock() -> None:
    done = threading.Event()

    def parse() -> None:
        parse_limited("x = 1\n")
        done.set()

    with PARSE_LOCK:
        worker = threading.Thread(target=parse, daemon=True)
        worker.start()
        # not a timing assertion: the parse cannot finish while the lock is held, however long we wait
        assert not done.wait(0.5)
    worker.join()
    assert done.is_set()
