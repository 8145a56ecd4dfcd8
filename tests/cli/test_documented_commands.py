"""Every shell command the documentation shows is true: it parses against the real command line, and the cheap ones
run and end as the page says.

The commands are read from the fenced blocks of README.md and docs/*.md: blocks tagged bash, sh, shell or console,
and untagged blocks whose first line starts like a command (``warpforge``, ``.venv/bin/warpforge``, ``$ ``,
``python benchmarks/``, ``make``, ``pytest``). Python, YAML and JSON blocks, directory trees and diagrams are not
commands. In a block, ``\\`` continues a line, an indented line that starts with ``[`` continues a usage synopsis,
a heredoc's lines belong to the command that opens it, ``# ...`` at the end of a line is the page's comment on it,
and in a ``$ `` transcript the lines after a command are what it printed.

Parsing, by rule:

- every ``warpforge`` invocation (a ``$(...)`` inside a line is one of its own and stands for one word where it
  is) walks the Typer/Click tree word by word and then makes the leaf command's context from the documented
  arguments, as Click does before running it: a misspelt command, a removed option, a value of the wrong type or
  a missing argument fails. Placeholders in capitals (``CAMPAIGN``, ``TASK...``) are text values, as Click takes
  them;
- a usage synopsis (a line with ``[-``) is checked option by option: every ``--flag`` it writes (both halves of
  ``--train/--infer``) exists on that command;
- ``make T`` names a target of the Makefile, ``python FILE`` / ``python -m warpforge...`` name a file of this
  repository whose source spells every ``--flag`` written, and every repository path a command names exists.

Running: the tables below give each command a tier, the default one (it runs in every ``make test``), ``slow``
(``-m slow``) or not run, each with its reason; a command no table names fails the classification test, so a
new documented command has to be put somewhere. Commands of one block run in order in one bash session (a page's
block is what a reader types in one terminal), in a fresh temporary folder that holds links to the repository's
top-level entries and a ``.venv/bin`` whose ``warpforge`` and ``python`` are this checkout's, with
``WARPFORGE_DB`` a fresh SQLite file there and ``COLUMNS=80``. Each ends with the exit code its comment states
(``exit N``), else 0, and where the page shows what it printed the lines outside tables are compared. A
``$(...)`` of a command not run runs alone, and a comment's "N ship" is counted.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from warpforge.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_TAGS = {"bash", "sh", "shell", "console"}
STARTS = ("warpforge", ".venv/bin/warpforge", "$ ", "python benchmarks/", "make", "pytest")
FENCE = re.compile(r"^\s*```\s*([\w-]*)")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
SUBST = re.compile(r"\$\(([^()]*)\)")  # the docs nest none; a nested one would be read as text
CONTROL = {";", "&&", "||", "|", "&", "(", ")"}
REDIRECT = {">", ">>", "<", "<<"}
WARPFORGE = ("warpforge", ".venv/bin/warpforge")
PYTHON = ("python", ".venv/bin/python")
REPO_PATH = re.compile(r"(?:^|[:=])((?:src|tests|benchmarks|docs|scripts)/[\w./-]+)")
TABLE = re.compile(r"[┏┃┡│└━╇┩┳┻┗┛┓]")

DEFAULT, SLOW, NOT_RUN = 0, 1, 2

# A GPU command whose comment says what it does without one ("without one: exit 2") runs where there is none
# (no nvidia-smi): it must be refused, as said, before anything runs (3 s). It stores nothing for what follows.
GPU_REASON = "needs a GPU"
REFUSED = re.compile(r"without one: exit \d")
NO_GPU = shutil.which("nvidia-smi") is None
# The first table whose rule matches a command gives its tier and reason: NOT_RUN, then SLOW, then RUN. Rules
# match the command as written (its heredoc included). Durations were taken on a loaded 2-core machine.
NOT_RUN_RULES = {
    "a usage synopsis (checked option by option)": r"\[-",
    GPU_REASON: r"--backend cuda|-m gpu\b",
    "needs an LLM key or an LLM server": r"OPENAI_API_KEY|WARPFORGE_LLM_BASE_URL=http|\b(vllm|sglang|ollama)\b",
    "names the reader's own files or values": r"\b(CAMPAIGN|TASK|TARGET|problem\.py|my_variant\.py|my-model-config)\b",
    "a campaign on a real task (10 configurations took 410 s: each is checked in Triton's interpreter and "
    "compiled for sm_90)": r"warpforge run (?!tests/)",
    "a long run (make's set-up and campaign, a benchmark at 100,000 evaluations)": r"^make |--evaluations 100000",
    "the browser suite (3-5 min, chromium)": r"-m browser",
    "reads ../shared, the benchmark data beside the repository (minutes per run)": (
        r"\.\./shared|planner_validation|estimate_validation"
    ),
    "serves until stopped (its --check is tested in tests/dashboard)": r"warpforge dashboard(?!.*--check)",
}
SLOW_RULES = {
    "doctor probes Triton (14 s)": r"warpforge doctor",
    "bench-search on the three shipped spaces (86 s)": r"warpforge bench-search \$\(",
    "a campaign on the planted test task (38 s)": r"warpforge run tests/",
    "an LLM plan search against the scripted model (40 s with its replay)": r"warpforge plan search .*--proposer llm",
    "the read layer's example over the campaign above it": r"^python - <<'EOF'\nfrom warpforge\.db\.queries",
}
RUN_RULES = {
    "a listing, a read, a plan or an export of what is stored (1-7 s)": r"warpforge (tasks|problems|spaces|results|best"
    r"|agent transcripts|db upgrade|plan (predict|search|export)|export)\b",
    "a table from a committed JSON file (2 s)": r"python benchmarks/search_efficiency\.py --from benchmarks/results/",
}
# Shell set-up (a variable, a file, a server started or stopped) runs with the commands of its block it sets up:
# in the lightest tier any of them runs in, and not at all when none runs.
SETUP = re.compile(r"^(export |unset |kill |[A-Z_]+=|cat > |(\.venv/bin/)?python -m warpforge\.agent\.scripted )")
# A command not run whose rows a test fixture already holds: in the session the rows are written instead, and the
# commands after it read them. tests/cli/conftest.py's cpu-demo campaign is a copy of a real run of this very
# command (its six configurations and their compile facts).
STAND_INS = {
    r"warpforge run rmsnorm --trials 6 --backend interpret --campaign cpu-demo": (
        "import os, sys; from pathlib import Path; sys.path.insert(0, {tests!r}); "
        "from conftest import build_stored_db; "
        "build_stored_db(Path(os.environ['WARPFORGE_DB'].removeprefix('sqlite:///')))"
    ),
}
# Values a page prints in a comment beside the code that prints them (each is quoted from its page, checked below).
SHOWN = {
    r"from warpforge\.db\.queries import Reader": [
        "finished 4 {'ok': 4}",
        "['good']",
        "False 0 of 4 evaluations measured:",
        "()",
    ],
}
# The parameters that name a campaign or a task: a command that names what an earlier `run` or `plan search` of its
# block stores reads it, so it runs only where that command runs (in its tier or a heavier one).
NAMES = ("campaign", "llm_replay", "task", "task_name", "task_names")
WRITERS = ("warpforge run", "warpforge plan search")

CLI = typer.main.get_command(app)


# --- reading the pages -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Doc:
    page: str  # relative to the repository
    line: int  # of the command's first line
    code: str  # the command line, continuations joined, its comment removed
    comment: str
    heredoc: str  # the lines a heredoc feeds it ("" when none)
    output: tuple[str, ...]  # what a transcript shows it printed
    block: int  # the line of the block's opening fence

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def script(self) -> str:
        return f"{self.code}\n{self.heredoc}" if self.heredoc else self.code

    @property
    def expected_exit(self) -> int:
        m = re.search(r"\bexit (\d)\b", self.comment)
        return int(m.group(1)) if m else 0


def split_comment(line: str) -> tuple[str, str]:
    """The code and the comment of one shell line: a ``#`` outside quotes that starts a word starts the comment."""
    quote = ""
    for k, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip(), line[k + 1 :].strip()
    return line.rstrip(), ""


def blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(the fence's line, its tag, its lines) of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        yield i + 1, m.group(1), lines[i + 1 : j]
        i = j + 1


def is_shell(tag: str, body: list[str]) -> bool:
    if tag:
        return tag in SHELL_TAGS
    first = next((line.strip() for line in body if line.strip()), "")
    return first.startswith(STARTS)


def block_commands(page: str, fence: int, body: list[str]) -> list[Doc]:
    transcript = any(line.startswith("$ ") for line in body)
    docs: list[Doc] = []
    i = 0
    while i < len(body):
        line, number = body[i], fence + 1 + i
        i += 1
        if transcript:
            if not line.startswith("$ "):
                continue
            output = []
            while i < len(body) and not body[i].startswith("$ "):
                output.append(body[i])
                i += 1
            code, comment = split_comment(line[2:])
            docs.append(Doc(page, number, code, comment, "", tuple(output), fence))
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        line = line.rstrip()
        while line.endswith("\\") and i < len(body):
            line = f"{line[:-1].rstrip()} {body[i].strip()}"
            i += 1
        while i < len(body) and re.match(r"\s+\[", body[i]):  # a usage synopsis wrapped onto the next line
            line = f"{line} {body[i].strip()}"
            i += 1
        code, comment = split_comment(line)
        heredoc: list[str] = []
        if m := HEREDOC.search(code):
            while i < len(body) and body[i].strip() != m.group(2):
                heredoc.append(body[i])
                i += 1
            heredoc.append(m.group(2))
            i += 1
        docs.append(Doc(page, number, code, comment, "\n".join(heredoc), (), fence))
    return docs


def documented_commands() -> list[Doc]:
    docs: list[Doc] = []
    for path in PAGES:
        page = str(path.relative_to(ROOT))
        for fence, tag, body in blocks(path.read_text()):
            if is_shell(tag, body):
                docs.extend(block_commands(page, fence, body))
    return docs


DOCS = documented_commands()


def simple_commands(code: str) -> list[list[str]]:
    """The words of each simple command of a line, without redirections and leading ``VAR=value`` words; each
    ``$(...)`` is a command of its own and one word (``OUTPUT``) in the command around it."""
    found: list[list[str]] = []
    for part in [*SUBST.findall(code), SUBST.sub("OUTPUT", code)]:
        lexer = shlex.shlex(part, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token not in CONTROL:
                words.append(token)
                continue
            kept = [w for k, w in enumerate(words) if w not in REDIRECT and (k == 0 or words[k - 1] not in REDIRECT)]
            while kept and re.match(r"[A-Za-z_]\w*=", kept[0]):
                kept.pop(0)
            if kept:
                found.append(kept)
            words = []
    return found


def invocations(code: str) -> list[list[str]]:
    """The arguments of each ``warpforge`` invocation in a command line."""
    return [words[1:] for words in simple_commands(code) if words[0] in WARPFORGE]


# --- parsing ----------------------------------------------------------------------------------------------------
class DocError(Exception):
    """What a documented command gets wrong."""


def resolve(words: list[str]) -> tuple[Any, str, list[str]]:
    """The leaf command the leading words name, its full name and the words left for it."""
    command, path, rest = CLI, ["warpforge"], list(words)
    while hasattr(command, "commands"):  # a group (Typer vendors Click, so no isinstance on click.Group)
        if not rest or rest[0] not in command.commands:
            got = repr(rest[0]) if rest else "nothing"
            raise DocError(f"`{' '.join(path)}` has no command {got}: it has {', '.join(sorted(command.commands))}")
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    return command, " ".join(path), rest


def parsed(words: list[str]) -> tuple[str, dict[str, Any]]:
    """The command's name and its parameters, as Click makes them from these words (DocError when it cannot)."""
    command, name, rest = resolve(words)
    try:
        ctx = command.make_context(name, rest)
    except typer.TyperException as exc:  # Click's usage errors (Typer vendors Click)
        raise DocError(f"`{name}`: {exc}") from None
    return name, dict(ctx.params)


def check_synopsis(words: list[str]) -> None:
    """A usage synopsis is the page's whole usage line: it writes every option of its command, and a value written
    after an optional one (``[--port 8787]``) is its default, or a placeholder in capitals (``[--db URL]``); of
    ``package|hf-kernels`` the first is the default."""
    command, name, rest = resolve([w.strip("[]") for w in words])
    rest = words[len(words) - len(rest) :]  # as written, brackets included
    options = {o: p for p in command.params if p.param_type_name == "option" for o in (*p.opts, *p.secondary_opts)}
    written = set()
    for k, word in enumerate(rest):
        for flag in word.strip("[]").split("/"):
            if flag.startswith("-") and flag not in options:
                raise DocError(f"`{name}` has no option {flag}: it has {', '.join(sorted(options))}")
            written |= {options[flag].name} if flag.startswith("-") else set()
        value = rest[k + 1].rstrip("]") if k + 1 < len(rest) else "["
        if not (word.startswith("[-") and not word.endswith("]") and "/" not in word) or value[0] in "[-":
            continue  # not an optional option with a value
        default = options[word.strip("[]")].default
        if not re.fullmatch(r"[A-Z][A-Z_]*", value) and value.split("|")[0] != str(default):
            raise DocError(
                f"`{name}` {word.strip('[]')} defaults to {default}, the synopsis shows {value}: write "
                "its default or a placeholder in capitals"
            )
    missing = [p.opts[0] for p in command.params if p.param_type_name == "option" and p.name not in written]
    if missing:
        raise DocError(f"the synopsis of `{name}` leaves out {', '.join(missing)}")


def check_program(words: list[str]) -> None:
    """A program of this repository that a command names: a make target, a script or module and its --flags."""
    program, args = words[0], words[1:]
    if program == "make":
        targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
        for target in args:
            if target not in targets:
                raise DocError(f"the Makefile has no target {target!r}: it has {', '.join(sorted(targets))}")
        return
    if program not in PYTHON or not args or args[0] == "-":
        return
    if args[0] == "-m":
        if not args[1].startswith("warpforge"):
            return  # another project's module (sglang)
        spec = importlib.util.find_spec(args[1])
        if spec is None or spec.origin is None:
            raise DocError(f"there is no module {args[1]}")
        source, args = Path(spec.origin), args[2:]
    else:
        source, args = ROOT / args[0], args[1:]
        if not source.is_file():
            raise DocError(f"there is no file {args[0]}")
    text = source.read_text()
    for flag in (a.split("=")[0] for a in args if a.startswith("--")):
        if f'"{flag}"' not in text:
            raise DocError(f"{source.relative_to(ROOT)} takes no option {flag}")


def check(doc: Doc) -> None:
    """Raise DocError when the command does not parse or names what is not there."""
    for path in REPO_PATH.findall(doc.code):
        if not (ROOT / path).exists():
            raise DocError(f"there is no {path} in the repository")
    if "[-" in doc.code:
        words = shlex.split(doc.code)
        check_synopsis(words[1:] if words[0] in WARPFORGE else words)
        return
    for words in simple_commands(doc.code):
        if words[0] in WARPFORGE:
            parsed(words[1:])
        else:
            check_program(words)


# --- classifying ------------------------------------------------------------------------------------------------
def first_rule(rules: dict[str, str], text: str) -> str | None:
    return next((reason for reason, rule in rules.items() if re.search(rule, text, re.M)), None)


def stand_in(doc: Doc) -> str | None:
    return next((code for rule, code in STAND_INS.items() if re.search(rule, doc.code)), None)


def own_tier(doc: Doc) -> tuple[int, str] | None:
    for tier, rules in ((NOT_RUN, NOT_RUN_RULES), (SLOW, SLOW_RULES), (DEFAULT, RUN_RULES)):
        if reason := first_rule(rules, doc.script):
            return tier, reason
    return None


def names(words: list[str]) -> tuple[str, set[str]]:
    name, params = parsed(words)
    values: set[str] = set()
    for key in NAMES:
        value = params.get(key)
        values |= {value} if isinstance(value, str) else set(value or ())
    return name, values


def classify(docs: list[Doc]) -> dict[Doc, tuple[int, str]]:
    """Each command's tier and reason (module docstring); a command no rule names is left out."""
    tiers: dict[Doc, tuple[int, str]] = {}
    stored: dict[str, tuple[Doc, int, str]] = {}  # a campaign or task name -> the command of its block storing it
    block = None
    for doc in docs:
        if (doc.page, doc.block) != block:
            block, stored = (doc.page, doc.block), {}
        own = own_tier(doc)
        if own is None or SETUP.match(doc.code) and own[0] != NOT_RUN:
            continue  # unclassified, or set-up (below)
        tier, reason = own
        for words in invocations(doc.code) if "[-" not in doc.code else []:
            name, named = names(words)
            for value in sorted(named & set(stored)):
                writer, wtier, wreason = stored[value]
                if wtier > tier:
                    tier, reason = wtier, f"reads {value}, which {writer.where} stores ({wreason})"
            for value in named if name in WRITERS else ():
                stored.setdefault(value, (doc, DEFAULT if stand_in(doc) else tier, reason))
        if reason == GPU_REASON and NO_GPU and REFUSED.search(doc.comment):
            tier, reason = DEFAULT, "refused without a GPU, as its comment says (3 s)"
        tiers[doc] = (tier, reason)
    for doc in docs:
        if SETUP.match(doc.code) and doc not in tiers:
            served = [
                tiers[d][0]
                for d in docs
                if (d.page, d.block) == (doc.page, doc.block) and d in tiers and not SETUP.match(d.code)
            ]
            tier = min([t for t in served if t != NOT_RUN], default=NOT_RUN)
            tiers[doc] = (
                tier,
                "shell set-up for the commands of its block"
                if tier != NOT_RUN
                else "shell set-up for commands that are not run",
            )
    return tiers


TIERS = classify(DOCS)


# --- running ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    stood_in: bool  # a stand-in wrote its rows: nothing of the command's own to compare

    def lines(self) -> list[str]:
        return [" ".join(line.split()) for line in self.out.splitlines()]


def session(tmp: Path) -> dict[str, str]:
    """The folder a reader types in (the repository's top-level entries, and .venv/bin) and the environment."""
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and not (tmp / entry.name).exists():
            (tmp / entry.name).symlink_to(entry)
    bin_dir = tmp / ".venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, run in (("python", ""), ("warpforge", " -m warpforge.cli")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)}{run} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARPFORGE_LLM_", "OPENAI_"))}
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "src"),
        "WARPFORGE_DB": f"sqlite:///{tmp / 'x.db'}",
        "COLUMNS": "80",
        "PWD": str(tmp),
    }
    return env


def run_block(docs: list[Doc], tier: int, tmp: Path, timeout: float) -> dict[Doc, Ran]:
    """Run the block's commands of this tier or lighter, in order, in one bash session; each one's exit code and
    output (stdout then stderr). A command not run that has a stand-in writes the stand-in's rows instead."""
    env = session(tmp)
    logs = tmp / ".doc-commands"
    logs.mkdir()
    script, ran = [], []
    for k, doc in enumerate(docs):
        if TIERS[doc][0] <= tier:
            text = doc.script
        elif (code := stand_in(doc)) is not None:
            text = f"python -c {shlex.quote(code.format(tests=str(ROOT / 'tests' / 'cli')))}"
        else:
            continue
        script.append(f"{{ {text}\n}} >{logs}/{k}.out 2>{logs}/{k}.err; echo $? >{logs}/{k}.rc")
        ran.append((k, doc, text != doc.script))
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        try:  # a server a block starts in the background ends with the session
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, err
    results = {}
    for k, doc, stood_in in ran:
        rc = logs / f"{k}.rc"
        results[doc] = Ran(
            int(rc.read_text()) if rc.exists() else -1,
            (logs / f"{k}.out").read_text() + (logs / f"{k}.err").read_text(),
            stood_in,
        )
    return results


def shown_lines(doc: Doc) -> list[str]:
    """What the page shows a command printing, to compare: a transcript's lines outside tables, less the one with
    a path and a duration (`stored in sqlite:////home/you/... (72 s)`); a value printed beside its code."""
    lines = [" ".join(line.split()) for line in doc.output if line.strip() and not TABLE.search(line)]
    lines = [line for line in lines if not line.startswith("stored in ")]
    for rule, values in SHOWN.items():
        if re.search(rule, doc.script):
            lines += values
    return lines


def problems_of(docs: list[Doc], results: dict[Doc, Ran]) -> list[str]:
    bad = []
    for doc, ran in results.items():
        if ran.stood_in:
            assert ran.code == 0, f"{doc.where}: its stand-in failed: {ran.out[-2000:]}"
            continue
        if ran.code != doc.expected_exit:
            bad.append(
                f"{doc.where} `{doc.code}` exited {ran.code}, the page says {doc.expected_exit}:\n" + ran.out[-2000:]
            )
            continue
        printed = ran.lines()
        missing = [line for line in shown_lines(doc) if not any(p.startswith(line) for p in printed)]
        if missing:
            bad.append(f"{doc.where} `{doc.code}` did not print what the page shows: {missing}\n" + ran.out[-2000:])
    return bad


def block_ids(tier: int) -> list[tuple[str, int]]:
    """Blocks with a command of exactly this tier to run (set-up alone is not a reason to start a session)."""
    found = []
    for doc in DOCS:
        key = (doc.page, doc.block)
        if TIERS.get(doc, (NOT_RUN, ""))[0] == tier and not SETUP.match(doc.code) and key not in found:
            found.append(key)
    return found


# --- tests ------------------------------------------------------------------------------------------------------
def test_the_reader_finds_the_commands_and_only_them() -> None:
    codes = [d.code for d in DOCS]
    assert len(DOCS) > 60, len(DOCS)
    assert ".venv/bin/warpforge problems" in codes  # README's command list
    assert "warpforge best rmsnorm --limit 3" in codes and ".venv/bin/warpforge tasks" in codes
    transcript = next(d for d in DOCS if d.code == "warpforge results --campaign cpu-demo")
    assert transcript.output[0] == "warpforge results: 1-6 of 6, newest first"
    best = next(d for d in DOCS if d.code == "warpforge best rmsnorm --limit 3")
    assert transcript.expected_exit == 0 and best.expected_exit == 1  # "# exit 1: no timed winner; ..."
    # A wrapped synopsis is one command; a heredoc's lines are not commands; trees and python blocks are skipped.
    assert any(c.startswith("warpforge export (TASK... |") and c.endswith("[--patch] [--json]") for c in codes)
    assert not any(c.startswith(("from ", "models:", "print(", "src/", "evaluator/", "DIR/")) for c in codes)
    assert any(c == "python - <<'EOF'" and "Reader(" in d.heredoc for d, c in zip(DOCS, codes))
    assert simple_commands("A=1 warpforge run $(warpforge problems --paths | grep x) --json > /dev/null &") == [
        ["warpforge", "problems", "--paths"],
        ["grep", "x"],
        ["warpforge", "run", "OUTPUT", "--json"],
    ]
    assert split_comment("""run '{"a": 1}' --x  # note's "quote" """) == ("""run '{"a": 1}' --x""", 'note\'s "quote"')


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.where)
def test_every_documented_command_parses(doc: Doc) -> None:
    try:
        check(doc)
    except DocError as exc:
        pytest.fail(f"{doc.where}: `{doc.code}`: {exc}")


@pytest.mark.parametrize(
    ("line", "broken", "needle"),
    [
        (".venv/bin/warpforge run softmax --trials 10 --campaign sm", ("--trials", "--trails"), "No such option"),
        (".venv/bin/warpforge results --campaign sm", ("results", "result"), "has no command 'result'"),
        (
            "warpforge plan search  --model llama3-70b --cluster dgx-h100 --nodes 8 --json",
            ("plan", "plans"),
            "has no command 'plans'",
        ),
        (
            ".venv/bin/warpforge plan search --model llama3-70b --cluster dgx-h100 --nodes 8",
            ("8", "eight"),
            "valid integer",
        ),
        ("warpforge agent transcripts CAMPAIGN [--task T] [--full]", ("--full", "--fulll"), "no option --fulll"),
        ("warpforge agent transcripts CAMPAIGN [--task T] [--full]", ("agent ", ""), "no command 'transcripts'"),
        ("warpforge dashboard [--host 127.0.0.1] [--port 8787]", ("8787", "8080"), "--port defaults to 8787"),
        ("warpforge dashboard [--host 127.0.0.1] [--port 8787]", (" [--check]", ""), "leaves out --check"),
        ("python benchmarks/dashboard_routes.py --evaluations 100000", ("--evaluations", "--rows"), "no option --rows"),
        ("make test", ("test", "tests"), "no target 'tests'"),
    ],
)
def test_a_broken_copy_of_a_documented_line_fails(line: str, broken: tuple[str, str], needle: str) -> None:
    (doc,) = [d for d in DOCS if d.code.startswith(line)]
    check(doc)  # the line as the docs have it
    wrong = Doc(doc.page, doc.line, doc.code.replace(*broken, 1), doc.comment, doc.heredoc, doc.output, doc.block)
    with pytest.raises(DocError, match=re.escape(needle)):
        check(wrong)


def test_a_wrong_exit_code_or_output_and_an_unclassified_command_are_caught() -> None:
    best = next(d for d in DOCS if d.code == "warpforge best rmsnorm --limit 3")
    printed = "\n".join(best.output)
    assert problems_of([best], {best: Ran(1, printed, stood_in=False)}) == []
    assert "exited 0, the page says 1" in problems_of([best], {best: Ran(0, printed, stood_in=False)})[0]
    changed = printed.replace("static ranking for sm_90", "static ranking for sm_80")
    assert "did not print what the page shows" in problems_of([best], {best: Ran(1, changed, stood_in=False)})[0]
    new = Doc("README.md", 1, "warpforge eval softmax tests/evaluator/planted/good.py", "", "", (), 0)
    assert new not in classify([new])  # no rule says what it costs: the classification test names it


def test_every_documented_command_is_classified() -> None:
    unclassified = [f"{d.where}: {d.code}" for d in DOCS if d not in TIERS]
    assert not unclassified, (
        "put each in RUN_RULES, SLOW_RULES or NOT_RUN_RULES (or SETUP) with its reason: " + "; ".join(unclassified)
    )
    # Every rule still names a command (a rule for a command the docs dropped would hide a new one).
    scripts = "\n\n".join(d.script for d in DOCS)
    for rule in [*NOT_RUN_RULES.values(), *SLOW_RULES.values(), *RUN_RULES.values(), *STAND_INS, *SHOWN]:
        assert re.search(rule, scripts, re.M), f"no documented command matches {rule!r} any more"
    for values in SHOWN.values():  # quoted from the pages
        assert all(any(v in p.read_text() for p in PAGES) for v in values), values


@pytest.mark.parametrize(("page", "block"), block_ids(DEFAULT), ids=lambda v: str(v))
def test_cheap_documented_commands_run_as_the_page_says(page: str, block: int, tmp_path: Path) -> None:
    docs = [d for d in DOCS if (d.page, d.block) == (page, block)]
    bad = problems_of(docs, run_block(docs, DEFAULT, tmp_path, timeout=120))
    assert not bad, "\n\n".join(bad)


def test_what_a_command_not_run_substitutes_is_printed(tmp_path: Path) -> None:
    """A `$(...)` of a command not run in this tier runs alone: it exits 0 and prints at least one word, every path
    it prints exists (README's `run $(warpforge problems --paths | grep 23_Softmax)`)."""
    env = session(tmp_path)
    subs = {s for d in DOCS if TIERS[d][0] != DEFAULT for s in SUBST.findall(d.code) if s.split()[0] in WARPFORGE}
    assert len(subs) >= 2, subs
    for sub in sorted(subs):
        proc = subprocess.run(["bash", "-c", sub], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        words = proc.stdout.split()
        assert proc.returncode == 0 and words, (sub, proc.stdout, proc.stderr)
        assert all(Path(tmp_path, w).exists() for w in words if "/" in w), (sub, words)


def test_a_count_of_what_ships_is_what_ships(tmp_path: Path) -> None:
    """A comment that says "N ship" (README: problems, spaces) is the number of paths the command prints with
    --paths in a session, which sees only what ships (no ../shared beside its folder)."""
    env = session(tmp_path)
    counted = [(d, int(m.group(1))) for d in DOCS if (m := re.search(r"\b(\d+) ship\b", d.comment))]
    assert len(counted) >= 2, counted
    for doc, count in counted:
        proc = subprocess.run(
            ["bash", "-c", f"{doc.code} --paths"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stdout.split()) == count, f"{doc.where}: `{doc.code}` says {count} ship: {proc.stdout}"


@pytest.mark.slow
@pytest.mark.parametrize(("page", "block"), block_ids(SLOW), ids=lambda v: str(v))
def test_slower_documented_commands_run_as_the_page_says(page: str, block: int, tmp_path: Path) -> None:
    docs = [d for d in DOCS if (d.page, d.block) == (page, block)]
    bad = problems_of(docs, run_block(docs, SLOW, tmp_path, timeout=400))
    assert not bad, "\n\n".join(bad)
