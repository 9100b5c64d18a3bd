"""What is left of a gloo process group after ``destroy_process_group``, case by case.

Run from the repository's root (each case is a 2-rank torchrun launch, a few seconds each)::

    python -m studies.gloo_teardown.teardown                # the cases, into results/cases.txt
    python -m studies.gloo_teardown.teardown --launches 100 # the FSDP LoRA warm-start run,
                                                            # repeated: how many ranks abort

For each case a rank prints, after destroying the group and collecting garbage, whether the
default group's Python object is still alive (and its reference count) and the names of the
process's threads: gloo's are ``gloo_tcp_loop`` and ``pt_gloo_runloop``. Threads still running
then are torn down with the interpreter.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "results"
CASES = ("all_reduce", "all_gather_object", "ddp", "fully_shard", "gagpo_train_fsdp_lora")
TRAIN = ["train", "--model", "tiny", "--n-groups", "2", "--group-size", "2", "--max-steps", "4",
         "--max-new-tokens", "8", "--history-length", "0", "--eval-episodes", "2",
         "--eval-batch", "1", "--lr", "1e-3", "--no-tensorboard", "--no-progress",
         "--parallel", "fsdp", "--lora-rank", "4", "--mode", "score", "--bc-episodes", "3",
         "--iterations", "1"]
"""The flags of ``test_torchrun_fsdp_with_lora_score_mode_and_warm_start``'s run."""


def _threads() -> list[str]:
    return sorted(Path(f"/proc/self/task/{t}/comm").read_text().strip()
                  for t in os.listdir("/proc/self/task"))


def rank_main(case: str, out: str) -> None:
    """One rank of one case (under torchrun); ``out``: the training run's folder."""
    import torch
    import torch.distributed as dist

    refs: dict[str, weakref.ref] = {}
    if case == "gagpo_train_fsdp_lora":
        import gagpo.trainer as trainer
        from gagpo.cli import main

        leave = trainer.shutdown_distributed

        def spied() -> None:  # the group, seen just before gagpo leaves it
            refs["group"] = weakref.ref(dist.distributed_c10d._get_default_group())
            leave()

        trainer.shutdown_distributed = spied
        main([*TRAIN, "--out-dir", out])
    else:
        dist.init_process_group("gloo")
        refs["group"] = weakref.ref(dist.distributed_c10d._get_default_group())
        if case == "all_reduce":
            dist.all_reduce(torch.ones(3))
        elif case == "all_gather_object":
            dist.all_gather_object([None, None], {"rank": dist.get_rank()})
        elif case == "ddp":
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 3))
            model(torch.ones(2, 3)).sum().backward()
            del model
        elif case == "fully_shard":
            from torch.distributed.fsdp import fully_shard

            model = torch.nn.Sequential(torch.nn.Linear(4, 4))
            fully_shard(model)
            model(torch.ones(2, 4)).sum().backward()
            del model
        dist.barrier()
        dist.destroy_process_group()
    gc.collect()
    group = refs["group"]()
    alive = f"alive, {sys.getrefcount(group) - 1} references" if group is not None else "freed"
    if os.environ.get("RANK") == "0":  # (the other rank's line is the same, measured)
        print(f"RESULT {case}: group {alive}; threads {', '.join(_threads())}", flush=True)


def _torchrun(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), PYTHONFAULTHANDLER="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def cases() -> str:
    import torch

    lines = [f"torch {torch.__version__}, Python {sys.version.split()[0]}"]
    for case in CASES:
        with tempfile.TemporaryDirectory() as out:
            proc = _torchrun(["-m", "studies.gloo_teardown.teardown", "--rank-case", case,
                              "--rank-out", out])
        said = sorted({x for x in proc.stdout.splitlines() if x.startswith("RESULT")})
        lines += said or [f"RESULT {case}: exit {proc.returncode}: {proc.stderr[-500:]}"]
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def launches(n: int) -> str:
    aborted = failed = 0
    started = time.monotonic()
    for i in range(1, n + 1):
        with tempfile.TemporaryDirectory() as out:
            proc = _torchrun(["-m", "gagpo.cli", *TRAIN, "--out-dir", out])
        if proc.returncode != 0:
            if "terminate called without an active exception" in proc.stderr:
                aborted += 1
                (OUT / f"abort_{i}.txt").write_text(proc.stderr.replace(f"{ROOT}/", ""))
            else:
                failed += 1
        print(f"launch {i}: exit {proc.returncode}", flush=True)
    return (f"{n} launches of the FSDP LoRA warm-start run: {aborted} aborted in a C++ thread, "
            f"{failed} failed otherwise ({time.monotonic() - started:.0f} s)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rank-case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--rank-out", help=argparse.SUPPRESS)
    parser.add_argument("--launches", type=int, default=0)
    args = parser.parse_args()
    if args.rank_case:
        rank_main(args.rank_case, args.rank_out)
        return
    OUT.mkdir(exist_ok=True)
    if args.launches:
        (OUT / "launches.txt").write_text(launches(args.launches))
    else:
        (OUT / "cases.txt").write_text(cases())


if __name__ == "__main__":
    main()
