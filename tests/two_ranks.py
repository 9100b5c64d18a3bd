"""Run a test script under ``torchrun --nproc_per_node=2`` on gloo (CPU) ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def run_two_ranks(script: str, parallel: str, tmp_path: Path) -> dict:
    """Run ``tests/<script> <parallel> <out>`` on 2 gloo ranks; what rank 0 saved to ``out``."""
    out = tmp_path / f"{parallel}.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "tests" / script), parallel, str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out)
