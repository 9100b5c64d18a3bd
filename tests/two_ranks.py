"""Run code under ``torchrun --nproc_per_node=2`` on gloo (CPU) ranks.

Two ranks of the tiny model take about a minute on a quiet 2-core machine, and five times that
beside other work (measured: 133-298 s for the FSDP update comparison, whole test, while a
training run and a mutation run shared the machine). The suite's 300 s per test was the limit
such a test hit under load; tests that launch ranks carry :data:`TWO_RANKS` instead, and each
launch may take :data:`LAUNCH_TIMEOUT`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_TIMEOUT = 900
"""Seconds one torchrun launch may take before the test fails."""
TWO_RANKS = pytest.mark.timeout(3 * LAUNCH_TIMEOUT)
"""The per-test time limit of a test that launches ranks (up to three launches)."""


GLOO_ABORT = "terminate called without an active exception"
"""What a rank prints when a C++ thread aborts it (SIGABRT): seen once in a CI run of
``test_torchrun_fsdp_with_lora_score_mode_and_warm_start`` (2026-12-07), which then passed
alone; in 1 of 60 launches of that run since (``studies/gloo_teardown``), with no Python
frame left: the program had ended.
Where it comes from, as far as measured (torch 2.13, gloo): once a rank has built DDP or
``fully_shard`` (a bare model, no gagpo code), ``destroy_process_group`` leaves the default
group referenced and gloo's three threads (``gloo_tcp_loop``, two ``pt_gloo_runloop``) running
until the interpreter is torn down, where pytorch/pytorch#179291 places this abort (gloo's
threads releasing Python-owned tensors then); plain collectives leave none. Such a launch is
tried once more, and a second abort fails the test. The ranks run with Python's fault handler,
so an abort prints every Python thread's stack: the retry shows it."""


def _launch(args: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           *args]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), PYTHONFAULTHANDLER="1")
    for attempt in (1, 2):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=LAUNCH_TIMEOUT)
        if proc.returncode == 0 or GLOO_ABORT not in proc.stderr or attempt == 2:
            break
        where = proc.stderr[proc.stderr.index(GLOO_ABORT):][:4000]
        print(f"two_ranks: a rank aborted; launching again. What it printed:\n{where}",
              file=sys.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def run_two_ranks(script: str, parallel: str, tmp_path: Path) -> dict:
    """Run ``tests/<script> <parallel> <out>`` on 2 ranks; what rank 0 saved to ``out``."""
    out = tmp_path / f"{parallel}.pt"
    _launch([str(ROOT / "tests" / script), parallel, str(out)])
    return torch.load(out)


def save_from_rank_0(rank: int, result: dict, out: str) -> None:
    """End of a script under torchrun: rank 0 saves ``result`` for :func:`run_two_ranks`,
    then the ranks leave the group together (none leaves while another still talks to it)."""
    if rank == 0:
        torch.save(result, out)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def torchrun_train(out: Path, *extra: str) -> str:
    """``gagpo train`` of the tiny model on 2 ranks (a few steps; ``extra`` flags last, so
    they win) into ``out``; what it printed."""
    return _launch(["-m", "gagpo.cli", "train", "--model", "tiny", "--n-groups", "2",
                    "--group-size", "2", "--max-steps", "3", "--max-new-tokens", "8",
                    "--history-length", "0", "--eval-episodes", "2", "--eval-batch", "1",
                    "--lr", "1e-3", "--no-tensorboard", "--no-progress", "--out-dir", str(out),
                    *extra]).stdout
