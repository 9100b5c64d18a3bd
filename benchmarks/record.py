"""Recorded benchmark output: what a benchmark printed, headed by the exact command, the machine
and the date, written to ``benchmarks/results/<name>/report.txt`` so that every figure the
docs quote points at a committed file.

Benchmarks take ``--out DIR`` and wrap their printing in :func:`recorded`. Any other command
(``gagpo demo``, say) is recorded by running it under this module:

    python -m benchmarks.record benchmarks/results/demo -- python -m gagpo.cli demo

which streams the command's standard output as usual and also writes it to the report (its
standard error, progress bars included, is passed through and not recorded).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gagpo.common.cpu import arithmetic

RESULTS = Path(__file__).resolve().parent / "results"


def gpus() -> list[str]:
    """Names of the NVIDIA GPUs this process may use, as ``nvidia-smi`` reports them, restricted
    to ``CUDA_VISIBLE_DEVICES`` when that lists indices; empty without a driver (or when it does
    not answer in 10 s). Asked of the driver, not torch: a report's header is written before the
    benchmark, or its child process, imports torch."""
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = {}
    for line in listed.splitlines():
        index, _, name = line.partition(",")
        if name.strip():
            names[index.strip()] = name.strip()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not all(v.strip().isdigit() for v in visible.split(",") if v.strip()):
        return list(names.values())  # unset, or named by UUID: every GPU the driver lists
    return [names[v.strip()] for v in visible.split(",") if v.strip() in names]


def machine() -> str:
    """CPU model and the arithmetic it gives a 50M+ parameter model (bf16 autocast or float32:
    :func:`gagpo.common.cpu.arithmetic`), logical CPUs, memory, the GPUs (:func:`gpus`), OS and
    Python: what a reader needs to weigh a timing, and to know whether a run here repeats one
    recorded elsewhere."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import psutil

        memory = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        memory = ""
    devices = gpus()
    gpu = ", GPU " + ", ".join(f"{devices.count(n)}x {n}" for n in dict.fromkeys(devices)) \
        if devices else ""
    return (f"{cpu} ({arithmetic()}), {os.cpu_count()} logical CPUs{memory}{gpu}, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}")


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How to rerun a benchmark module with these arguments (``sys.argv`` when None)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", "-m", module, *args])


def header(command: str) -> str:
    """The report's first lines: command (with the thread setting it ran under), machine, date."""
    threads = os.environ.get("OMP_NUM_THREADS")
    env = f"OMP_NUM_THREADS={threads} " if threads else ""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"$ {env}{command}\n# machine: {machine()}\n# date: {when}\n"


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, real: io.TextIOBase) -> None:
        self.real, self.copy = real, io.StringIO()

    def write(self, s: str) -> int:
        self.copy.write(s)
        return self.real.write(s)

    def flush(self) -> None:
        self.real.flush()


@contextlib.contextmanager
def recorded(out: Path | None, command: str,
             summarize: Callable[[str], dict] | None = None) -> Iterator[None]:
    """Print as usual; with ``out``, also write what was printed (after :func:`header`) to
    ``out/report.txt`` when the block completes, and with ``summarize``, its figures as
    ``out/summary.json`` (``summarize(report_text)``: what ``benchmarks.figures`` quotes). A
    failed run writes nothing."""
    if out is None:
        yield
        return
    tee = _Tee(sys.stdout)
    started = header(command)
    with contextlib.redirect_stdout(tee):
        yield
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = started + tee.copy.getvalue()
    (out / "report.txt").write_text(report)
    if summarize is not None:
        (out / "summary.json").write_text(json.dumps(summarize(report), indent=1) + "\n")
    print(f"(recorded in {out / 'report.txt'})")


def run_recorded(out: Path, command: Sequence[str]) -> int:
    """Run ``command``, streaming its stdout, and record it in ``out/report.txt`` if it
    succeeds. Returns its exit status."""
    started = header(shlex.join(command))
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    if proc.returncode == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.txt").write_text(started + "".join(lines))
    return proc.returncode


def run_child(argv: Sequence[str], log: Path, *, append: bool = True
              ) -> tuple[int, resource.struct_rusage]:
    """Run ``argv`` with its standard output and error to the file ``log``, and return its
    exit status and its own resource usage (peak memory, CPU time: ``os.wait4``'s, this
    child's alone).

    Should this process stop waiting (a signal, Ctrl-C in another terminal, a test's
    timeout), the child is ended before the exception goes on: a training run left to itself
    would hold the CPU and the work folder for an hour with no one to record it."""
    with open(log, "a" if append else "w") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
    return os.waitstatus_to_exitcode(status), usage


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m benchmarks.record OUT_DIR -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    return run_recorded(Path(args[0]), args[2:])


if __name__ == "__main__":
    raise SystemExit(main())
