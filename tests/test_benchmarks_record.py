"""Recorded benchmark output (benchmarks/record.py) and the README's pointers to it."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path

import pytest

from benchmarks.record import gpus, machine, recorded, run_recorded

ROOT = Path(__file__).resolve().parent.parent


def test_recorded_writes_the_command_machine_and_output(tmp_path, capsys):
    with recorded(tmp_path / "bench", "python -m benchmarks.x --flag 1"):
        print("figure 42")
    printed = capsys.readouterr().out
    assert printed.startswith("figure 42\n")  # still printed as usual
    lines = (tmp_path / "bench" / "report.txt").read_text().splitlines()
    assert lines[0].startswith("$ ") and lines[0].endswith("python -m benchmarks.x --flag 1")
    assert lines[1] == f"# machine: {machine()}" and lines[2].startswith("# date: ")
    assert "(float32)" in lines[1] or "(bf16 autocast)" in lines[1]  # which arithmetic ran
    assert lines[3:] == ["figure 42"]


def test_the_machine_line_names_the_gpus_the_driver_lists(tmp_path, monkeypatch):
    """A GPU run's report says which GPUs it had (this CPU machine has none: a stand-in
    ``nvidia-smi`` answers as the driver does), only those ``CUDA_VISIBLE_DEVICES`` leaves it,
    and nothing when there is no driver or it fails."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ -n \"$SMI_FAIL\" ] && exit 9\n"
                   "printf '0, NVIDIA H200\\n1, NVIDIA H200\\n2, NVIDIA H100 80GB HBM3\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus() == ["NVIDIA H200", "NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert ", GPU 2x NVIDIA H200, 1x NVIDIA H100 80GB HBM3, " in machine()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert gpus() == ["NVIDIA H100 80GB HBM3"]
    assert ", GPU 1x NVIDIA H100 80GB HBM3, " in machine()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CUDA's way of hiding every GPU
    assert gpus() == [] and "GPU" not in machine()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-6f1c")  # by UUID: the driver's whole list
    assert len(gpus()) == 3
    monkeypatch.setenv("SMI_FAIL", "1")
    assert gpus() == [] and "GPU" not in machine()
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert gpus() == []


def test_recorded_writes_nothing_for_a_failed_run_or_without_out(tmp_path, capsys):
    with pytest.raises(RuntimeError), recorded(tmp_path / "bench", "cmd"):
        print("half")
        raise RuntimeError
    assert not (tmp_path / "bench").exists()
    with recorded(None, "cmd"):
        print("only printed")
    assert capsys.readouterr().out.endswith("only printed\n")


def test_run_recorded_keeps_a_command_s_stdout(tmp_path):
    code = "import sys; print('out'); print('err', file=sys.stderr)"
    assert run_recorded(tmp_path / "ok", [sys.executable, "-c", code]) == 0
    lines = (tmp_path / "ok" / "report.txt").read_text().splitlines()
    assert lines[1].startswith("# machine: ") and lines[3:] == ["out"]
    assert run_recorded(tmp_path / "bad", [sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not (tmp_path / "bad").exists()


def test_results_the_readme_points_at_exist():
    readme = (ROOT / "README.md").read_text()
    paths = set(re.findall(r"(?<![\w/.-])(?:benchmarks/results|studies)/[\w./-]*\w", readme))
    assert paths, "the README points at no recorded results"
    missing = [p for p in sorted(paths) if not (ROOT / p).exists()]
    assert not missing, missing


def test_no_test_benchmark_or_tool_imports_a_frozen_study():
    """studies/ is read, never run by ``make bench`` nor imported by the suite: a helper that
    a test or a benchmark needs lives in the package, in benchmarks/ or with the tests."""
    importing = re.compile(r"^\s*(?:from|import)\s+studies\b", re.MULTILINE)
    files = [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tools").glob("*.py"),
             *(ROOT / "tests").rglob("*.py")]
    offenders = [str(f.relative_to(ROOT)) for f in files if importing.search(f.read_text())]
    assert not offenders, offenders


def test_make_bench_exits_1_when_a_benchmark_fails(monkeypatch, capsys):
    """``python -m benchmarks.run_all`` (``make bench``) with every benchmark replaced by a
    tiny one: all run, in order; one that fails (an exit code, an exception) makes the whole
    run exit 1 with the failed ones named; none failing, it exits 0."""
    import types

    from benchmarks import run_all

    benches = [name for name, m in vars(run_all).items() if isinstance(m, types.ModuleType)
               and m.__name__.startswith("benchmarks.")]
    assert len(benches) >= 10
    ran: list[str] = []

    def tiny(name: str, fails: bool) -> types.SimpleNamespace:
        def main(argv):
            ran.append(name)
            if fails and name == "cpu_costs":
                raise RuntimeError("tiny benchmark broke")
            return 2 if fails and name == "vector_bench" else {"figure": 1.0}

        return types.SimpleNamespace(main=main, RESULTS=Path("unused"))

    for fails in (True, False):
        for name in benches:
            monkeypatch.setattr(run_all, name, tiny(name, fails))
        ran.clear()
        assert run_all.main([]) == (1 if fails else 0)
        assert set(ran) == set(benches)  # the failures stopped nothing
        out = capsys.readouterr().out
        if fails:  # vector_bench runs twice (WebShop, ALFWorld)
            assert "\nfailed: vector_bench, vector_bench_alfworld, cpu_costs\n" in out
        else:
            assert "every benchmark ran" in out and "FAILED" not in out


def test_make_bench_reports_a_failed_benchmark_and_runs_the_rest(capsys):
    """``benchmarks.run_all.run``: an exit code, a refusal or an exception is a failure,
    named; a benchmark returning its figures (a dict, None, 0) is not; each runs regardless."""
    from benchmarks.run_all import run

    def boom(argv):
        raise ValueError("broken")

    def refuse(argv):
        raise SystemExit("unknown option")

    failures: list[str] = []
    calls: list[list[str]] = []
    for name, main in (("figures", lambda a: calls.append(a) or {"x": 1.0}),
                       ("exit1", lambda a: calls.append(a) or 1), ("boom", boom),
                       ("refused", refuse), ("ok", lambda a: calls.append(a) or 0),
                       ("none", lambda a: calls.append(a))):
        run(name, main, ["--flag"], failures)
    assert failures == ["exit1", "boom", "refused"]
    assert calls == [["--flag"]] * 4
    out = capsys.readouterr()
    assert "=== boom FAILED" in out.out and "ValueError: broken" in out.err


def test_a_child_ends_when_its_driver_stops_waiting(tmp_path):
    """The real-model driver and the iteration benchmark wait on hour-long training processes:
    if the wait is interrupted (a signal, a test's timeout), the child must not train on alone."""
    import signal

    from benchmarks.record import run_child

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    log = tmp_path / "child.log"
    sleeper = [sys.executable, "-c",
               "import os, time; print(os.getpid(), flush=True); time.sleep(120)"]
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 3.0)
    pid = None
    try:
        with pytest.raises(Interrupted):
            run_child(sleeper, log)
        pid = int(log.read_text().split()[0])
        with pytest.raises(ProcessLookupError):  # ended and reaped
            os.kill(pid, 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # Run to the end, it reports its exit status and its own usage.
    status, usage = run_child([sys.executable, "-c", "raise SystemExit(3)"], log, append=False)
    assert status == 3 and usage.ru_maxrss > 0 and log.read_text() == ""
