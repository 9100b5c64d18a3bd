"""The documentation runs as written: every ```python, ```bash and ```toml block of README.md,
envs/alfworld/README.md and every page under docs/ (the documentation site's pages), found by
Sybil's Markdown parsers.

- A ```python block runs as a script of its own (written to a file in a fresh folder, run by
  this venv's python), as a user who copies it into a file would run it: it needs its own
  imports, and an ``if __name__ == "__main__":`` guard where it starts worker processes.
- A ```bash block runs line by line (backslash continuations joined, comments left out) with
  bash, in a fresh folder, this venv's ``bin`` first on ``PATH`` and the repository's root on
  ``PYTHONPATH`` (``python -m benchmarks.x`` runs as from the root); a line that exits non-zero
  fails the block. A ``gagpo serve`` line is started on a free port, must answer
  ``/api/v1/info``, and is stopped; a line listed in ``MUST_FAIL`` must be refused.
- A ```toml block must load as ``gagpo train --config`` loads it, and a block whose first line
  names a file (``# docs/recipe-webshop.toml: ...``) must be that file's text.
- Output blocks (no language) are not run. A block that needs what CI lacks (a GPU, a server,
  the original data, the internet) follows Sybil's skip directive, ``<!-- skip: next "the
  reason" -->``, and the prose beside it says so to the reader.

Long commands are shortened before they run by ``SHORTER`` (fewer episodes, iterations, rollouts
and tokens, the tiny model for SmolLM2 where it would generate for minutes); docs/testing.md
describes it. ``FIGURES`` checks the figures the docs quote against the output of the commands
that print them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request
from pathlib import Path

import pytest
from sybil import Example, Sybil
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "envs/alfworld/README.md",
        *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")))
VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's bin, not the base python's
TIMEOUT = 300  # seconds per command or script

#: What the docs test runs instead of a command or script text that would take minutes, as
#: ``(regular expression, replacement, why)``, applied in order to every ```python block and
#: every ```bash line. Every entry must apply somewhere (a test checks it).
TRAIN_FLAGS = (" --iterations 1 --n-groups 2 --group-size 2 --max-steps 3 --max-new-tokens 16"
               " --eval-episodes 2")
SHORTER: list[tuple[str, str, str]] = [
    (r"(\bgagpo(?:\.cli)? train\b.*)", r"\1" + TRAIN_FLAGS,
     "every `gagpo train` line: 1 iteration of 2 x 2 rollouts of 3 steps, 2 held-out episodes "
     "(flags given last win, over the line's own and over a --config file's)"),
    (re.escape("--model smollm2-135m"), "--model tiny",
     "training SmolLM2-135M on a CPU takes about 4 minutes for even that one short iteration"),
    (re.escape("--policy smollm2-135m --split test --episodes 4"),
     "--policy smollm2-135m --split test --episodes 1 --max-new-tokens 4 --env-arg max_steps=2",
     "the SmolLM2 evaluation: 1 episode of 2 steps (the whole line generates for 17 minutes)"),
    (re.escape('load_model("smollm2-135m")'), 'load_model("tiny")',
     "the rollout example: the tiny model (SmolLM2 takes 3 minutes even on 2 x 2 rollouts)"),
    (re.escape("n_tasks=4, group_size=8"), "n_tasks=2, group_size=2", "the rollout example"),
    (re.escape("tasks=[0, 1, 2, 3]"), "tasks=[0, 1]", "the rollout example"),
    (re.escape("max_new_tokens=256"), "max_new_tokens=16", "the rollout example"),
    (re.escape("n=100, seed=0"), "n=2, seed=0", "generate_games: 2 games, not 100 (2 minutes)"),
    (r"\bpython -m benchmarks\.credit_truth\b", "python -m benchmarks.credit_truth --quick",
     "docs/algorithms.md's ground-truth study: fewer draws (the full runs take 25 and 2 "
     "minutes)"),
]

#: Lines the docs show being refused: they must exit non-zero, printing this.
MUST_FAIL = {
    "gagpo serve webshop --host 0.0.0.0": "refusing to serve on 0.0.0.0",
}

#: Figures the docs quote, checked against the output of the command that prints them (each
#: runs in seconds): ``command -> [(the text the docs quote, a pattern its output must hold)]``;
#: the quoted text must be on one of the ``DOCS``.
FIGURES = {
    "gagpo eval --env WebShop-v0 --policy rule --split test --episodes 500": [
        ("scores 53.4 with 12.8% success on our 500 test goals",
         r"(?m)^all +500 +12\.8 \[[ 0-9.,]+\] +53\.4 \["),
        ("`gagpo eval --env WebShop-v0 --policy rule --split test --episodes 500` prints it",
         r"(?m)^all +500 "),
    ],
    "gagpo eval --env WebShop-v0 --policy expert --split test --episodes 500": [
        ("The goal-aware expert wins >= 95% of them", r"(?m)^all +500 +(9[5-9]|100)\.\d "),
    ],
    "gagpo eval --env ALFWorld-v0 --policy expert --split valid_unseen --episodes 24": [
        ("all                                  24  100.0 [ 86.2, 100.0]      100.0 [100.0, 100.0]",
         r"(?m)^all +24 +100\.0 \[ 86\.2, 100\.0\] +100\.0 \[100\.0, 100\.0\]$"),
    ],
}


def shorten(text: str) -> str:
    for pattern, replacement, _ in SHORTER:
        text = re.sub(pattern, replacement, text)
    return text


def _environment() -> dict[str, str]:
    """The blocks' environment: this venv first on ``PATH``, and the repository's root on
    ``PYTHONPATH``, since a reader runs ``python -m benchmarks.x`` from the root (the blocks
    run in fresh folders, so that their outputs never land in the repository)."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    path = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _folder(example: Example) -> Path:
    """A fresh folder for one block, in the test's ``tmp_path``."""
    folder = Path(example.namespace["tmp_path"]) / f"line{example.line}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(args: list[str], folder: Path, timeout: float) -> tuple[int | None, str, str]:
    """Exit status (None: it ran past ``timeout``, and was stopped with all it started),
    stdout and stderr."""
    proc = subprocess.Popen(args, cwd=folder, env=_environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        return None, "", ""
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """End ``proc``'s process group (it and the processes it started), if still running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "..." + text[-n:]


# --- ```python ----------------------------------------------------------------------------------

def run_python_script(example: Example) -> str | None:
    """The block as a script, ``python block.py`` in a folder of its own."""
    folder = _folder(example)
    script = folder / "block.py"
    script.write_text(shorten(str(example.parsed)))
    status, out, err = _run([sys.executable, script.name], folder, TIMEOUT)
    if status is None:
        return f"the block ran past {TIMEOUT} s"
    if status != 0:
        return f"the block, run as a script, exited with status {status}:\n{_tail(out + err)}"
    return None


class PythonScriptParser(PythonCodeBlockParser):
    """Sybil's Markdown parser of ```python blocks, each block run as a script of its own
    (``run_python_script``) rather than in a namespace shared with the document's other
    blocks: that is how a reader runs it, and worker processes (``spawn``) import the script
    as ``__mp_main__`` exactly as they would a user's."""

    def __init__(self) -> None:
        super().__init__()
        self.codeblock_parser = CodeBlockParser("python", run_python_script)


# --- ```bash ------------------------------------------------------------------------------------

def strip_comment(line: str) -> str:
    """``line`` without its ``# comment`` (a ``#`` that starts a word outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def command_lines(source: str) -> list[str]:
    """The commands of a ```bash block: continuations joined, comments and blank lines out."""
    lines = []
    for line in source.replace("\\\n", " ").splitlines():
        line = strip_comment(line).strip()
        if line:
            lines.append(" ".join(line.split()) if "'" not in line and '"' not in line else line)
    return lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_until_it_answers(command: str, folder: Path) -> str | None:
    """Start a ``gagpo serve`` line on a free port; it must answer ``/api/v1/info``."""
    port = _free_port()
    log = folder / f"serve-{port}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", f"{command} --port {port}"], cwd=folder,
                                env=_environment(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return (f"`{command}` exited with status {proc.returncode} instead of serving:\n"
                        f"{_tail(log.read_text())}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/info",
                                            timeout=5) as r:
                    if r.status == 200:
                        return None
            except OSError:
                time.sleep(0.5)
        return f"`{command}` did not answer on port {port} within 120 s:\n{_tail(log.read_text())}"
    finally:
        _stop(proc)


def run_bash_lines(example: Example) -> str | None:
    """Each command of the block in turn, in one fresh folder; the first failure fails it."""
    folder = _folder(example)
    for command in command_lines(str(example.parsed)):
        if command in MUST_FAIL:
            status, out, err = _run(["bash", "-c", command], folder, 60)
            if status is None:
                return f"`{command}` should be refused at once; it ran for 60 s"
            if status == 0 or MUST_FAIL[command] not in out + err:
                return (f"`{command}` should be refused ({MUST_FAIL[command]!r}), got status "
                        f"{status}:\n{_tail(out + err)}")
            continue
        if re.search(r"\bgagpo serve\b", command):
            failure = _serve_until_it_answers(shorten(command), folder)
            if failure:
                return failure
            continue
        run = shorten(command)
        status, out, err = _run(["bash", "-c", run], folder, TIMEOUT)
        shown = run if run == command else f"{run}` (shortened from `{command}"
        if status is None:
            return f"`{shown}` ran past {TIMEOUT} s"
        if status != 0:
            return f"`{shown}` exited with status {status}:\n{_tail(out + err)}"
        for _, pattern in FIGURES.get(command, ()):
            if not re.search(pattern, out):
                return f"`{command}` did not print what the docs quote ({pattern}):\n{out}"
    return None


# --- ```toml ------------------------------------------------------------------------------------

def check_toml(example: Example) -> str | None:
    """The block loads as ``gagpo train --config`` loads a file, and equals the file its first
    line names, if it names one."""
    from gagpo.train_config import TrainConfig, load_config_file

    text = str(example.parsed)
    named = re.match(r"# (\S+\.toml)\b", text)
    if named:
        path = ROOT / named.group(1)
        if not path.is_file() or path.read_text() != text:
            return f"{named.group(1)} is not the text of the block that names it"
    else:
        path = _folder(example) / "block.toml"
        path.write_text(text)
    try:
        TrainConfig(**load_config_file(path))
    except (TypeError, ValueError) as e:
        return f"the TOML block does not load as a training config: {e}"
    return None


# --- the documents ------------------------------------------------------------------------------

def sybil() -> Sybil:
    return Sybil(parsers=[SkipParser(), PythonScriptParser(),
                          CodeBlockParser("bash", run_bash_lines),
                          CodeBlockParser("toml", check_toml)])


def blocks(path: Path) -> list[Example]:
    """The document's runnable blocks (not its skip directives), in order."""
    return [e for e in sybil().parse(path) if not isinstance(e.region.evaluator, Skipper)]


def evaluate_block(path: Path, line: int, tmp_path: Path) -> None:
    """Evaluate the block at ``line`` of a freshly parsed ``path``, after the skip directive
    right before it, if any (Sybil keeps a skip's state per document, so every block gets a
    document of its own and the blocks can run, or be selected, independently)."""
    examples = list(sybil().parse(path))
    i = next(i for i, e in enumerate(examples) if e.line == line)
    examples[i].namespace["tmp_path"] = tmp_path
    if i and isinstance(examples[i - 1].region.evaluator, Skipper):
        examples[i - 1].evaluate()
    examples[i].evaluate()


DOC_BLOCKS = [pytest.param(doc, e.line, id=f"{doc}:{e.line}")
              for doc in DOCS for e in blocks(ROOT / doc)]


@pytest.mark.parametrize("doc, line", DOC_BLOCKS)
def test_doc_block_runs_as_written(doc, line, tmp_path):
    evaluate_block(ROOT / doc, line, tmp_path)


def test_every_block_is_seen_and_skips_name_their_reason():
    """Sybil sees every fenced block with a language (a new language would go unrun), and every
    skip is a ``skip: next`` with its reason, said in the prose just before it too."""
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        languages = set(re.findall(r"(?m)^ *```(\w+)$", text))
        assert languages <= {"python", "bash", "toml"}, (doc, languages)
        fenced = len(re.findall(r"(?m)^ *```(?:python|bash|toml)$", text))
        assert len(blocks(ROOT / doc)) == fenced, doc
        for m in re.finditer(r"(?m)^ *<!--+ *skip:(.*?)-->", text):
            assert re.fullmatch(r' next "[^"]+" ', m.group(1)), (doc, m.group(0))
            before = " ".join(text[max(0, m.start() - 400):m.start()].split())
            assert "the docs test skips" in before, (doc, m.group(0))


def test_every_shortening_and_figure_applies():
    """The tables keep up with the docs: each entry matches a block's text."""
    sources = [str(e.parsed) for doc in DOCS for e in blocks(ROOT / doc)]
    commands = [c for s in sources for c in command_lines(s)]
    for pattern, _, why in SHORTER:
        assert any(re.search(pattern, s) for s in sources + commands), (pattern, why)
    for command in [*MUST_FAIL, *FIGURES]:
        assert command in commands, command
    docs = " ".join(" ".join((ROOT / doc).read_text().split()) for doc in DOCS)
    for quotes in FIGURES.values():
        for quoted, _ in quotes:
            assert " ".join(quoted.split()) in docs, quoted


# --- the test fails when a block breaks ---------------------------------------------------------

FIXTURE = '''\
# A page of docs

```python
import sys
print(sys.version)
```

```bash
echo made > made.txt   # a comment
test -f made.txt && \\
  grep -q made made.txt
```

```python
import gagpo.no_such_module
```

```bash
true
false
```

```python
from gagpo.envs.vector import GroupVectorEnv

with GroupVectorEnv("WebShop-v0", n_tasks=1, group_size=1, backend="process") as vec:
    pass
```

Needs a GPU (the docs test skips this block):

<!-- skip: next "needs a CUDA GPU" -->
```python
raise SystemExit("never run")
```

```toml
lr = 1e-3
no_such_setting = 1
```

```bash
echo all 500 12.8
```

```bash
sleep 60
```
'''


def test_broken_blocks_fail_and_good_ones_pass(tmp_path, monkeypatch):
    """The same Sybil setup on a page of our own: the good blocks pass, the broken ones fail
    (a missing module, a failing line, a process-backed env without a ``__main__`` guard, an
    unknown setting, a figure the output lacks, a line past the time limit), and the skipped one
    is reported as skipped with its reason."""
    from sybil.example import SybilFailure

    page = tmp_path / "page.md"
    page.write_text(FIXTURE)
    found = blocks(page)
    assert len(found) == 9
    good, good_bash, missing, failing, unguarded, skipped, toml, figure, slow = (
        e.line for e in found)
    evaluate_block(page, good, tmp_path)
    evaluate_block(page, good_bash, tmp_path)
    with pytest.raises(SybilFailure, match="No module named 'gagpo.no_such_module'"):
        evaluate_block(page, missing, tmp_path)
    with pytest.raises(SybilFailure, match="`false` exited with status 1"):
        evaluate_block(page, failing, tmp_path)
    with pytest.raises(SybilFailure, match="__main__"):
        evaluate_block(page, unguarded, tmp_path)
    with pytest.raises(SybilFailure, match="unknown settings"):
        evaluate_block(page, toml, tmp_path)
    with pytest.raises(unittest.SkipTest, match="needs a CUDA GPU"):
        evaluate_block(page, skipped, tmp_path)
    # A figure the output does not hold fails its block.
    monkeypatch.setitem(FIGURES, "echo all 500 12.8", [("", r"53\.4")])
    with pytest.raises(SybilFailure, match="did not print what the docs quote"):
        evaluate_block(page, figure, tmp_path)
    # A line that runs past the time limit is stopped, and fails.
    monkeypatch.setattr(sys.modules[__name__], "TIMEOUT", 1)
    with pytest.raises(SybilFailure, match="`sleep 60` ran past 1 s"):
        evaluate_block(page, slow, tmp_path)


def test_lines_are_shortened_and_split_as_the_readme_says():
    assert shorten("gagpo train --env WebShop-v0 --iterations 50 --out-dir runs/ws").endswith(
        "--out-dir runs/ws" + TRAIN_FLAGS)
    assert command_lines("a \\\n  b   # c\n# d\n\nx='#'  # y\n") == ["a b", "x='#'"]
