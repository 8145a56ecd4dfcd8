"""The evaluator's walls (issue 26): bounded read-back, no keys in reach, no orphans, no unisolated LLM code.

The manifest fixtures (io_*, env_read, spin_forever) prove each verdict end to end in test_adversarial.py;
these tests pin what a verdict cannot show: the orchestrator's own memory, environment and processes.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import pytest

from warpforge.evaluator.readback import NotReadable, read_regular, tail_bytes, tail_text

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "evaluator" / "adversarial"


# --- bounded read-back ---------------------------------------------------------------------------------------

def test_tail_reads_only_the_end_of_a_large_file(tmp_path: Path) -> None:
    big = tmp_path / "stderr.txt"
    with open(big, "wb") as f:
        f.truncate(4 << 30)  # 4 GiB, sparse: reading it whole would cost 4 GiB
        f.seek((4 << 30) - 3)
        f.write(b"end")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert tail_bytes(big, 2000).endswith(b"end") and len(tail_bytes(big, 2000)) == 2000
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: far below 4 GiB


def test_symlinks_fifos_devices_and_hard_links_are_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to("/proc/self/environ")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "a").write_bytes(b"x")
    os.link(tmp_path / "a", tmp_path / "b")
    dev = tmp_path / "dev"
    dev.symlink_to("/dev/zero")
    for path, why in ((link, "symbolic link"), (fifo, "not a regular file"), (tmp_path / "b", "2 links"),
                      (dev, "symbolic link")):
        with pytest.raises(NotReadable, match=why):
            read_regular(path, 1 << 20)  # a FIFO would block forever in a plain open(): O_NONBLOCK
        assert tail_text(path).startswith(f"[{path.name} is ") and "refused" in tail_text(path)
    assert tail_text(tmp_path / "missing") == ""


def test_read_regular_caps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "out_0.pt"
    path.write_bytes(b"y" * 1000)
    assert read_regular(path, 1000) == b"y" * 1000
    with pytest.raises(NotReadable, match="cap"):
        read_regular(path, 999)


@pytest.mark.slow
def test_orchestrator_peak_memory_stays_bounded_under_floods() -> None:
    """Each fixture in a fresh orchestrator process; its own VmHWM against the honest control's (~2 min).

    The old read-back held every mark and the whole stderr file: 256 MiB floods added hundreds of MiB.
    """
    sys.path.insert(0, str(REPO / "benchmarks"))
    from orchestrator_memory import BOUND_MIB, measure, table

    rows = measure(("control_double", "io_stderr_flood", "io_marks_flood", "io_report_flood"), mib=256)
    print(table(rows))
    base = int(str(rows[0]["vmhwm_kib"]))
    assert rows[0]["verdict"] == "ok"
    for row in rows[1:]:
        assert int(str(row["vmhwm_kib"])) - base <= BOUND_MIB * 1024, row
    assert [r["reason"] for r in rows[2:]] == ["output_flood", "output_flood"]
