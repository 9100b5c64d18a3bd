"""``make bench``: every benchmark, one after another, each printing its figures.

    python -m benchmarks.run_all [--large N] [--out DIR]

The README's "Performance" figures are the committed reports in ``benchmarks/results/<name>/``
(``report.txt``: the command, the machine and the output). They come from this run, except:

- the WebShop rows for 1.2M products (search latency, serving memory, generate / convert /
  index, reopening a cached catalog) need ``--large 1200000``: a catalog of that size is
  generated, converted and indexed on first use (about ten minutes and several GB of memory,
  then cached under the gagpo cache);
- the trainer's overhead in the demo's run is read from ``make demo``'s metrics
  (``python -m benchmarks.trainer_overhead --from-run runs/demo``);
- the served shop's figures are ``serve_hardening --seconds 60``'s (here a 30-second load phase);
- the rollout throughput of SmolLM2-135M (today's transformers path against the shared prefill)
  is ``rollout_throughput``'s with its recorded settings (here 2 tasks x 4 copies, 3 steps, 32
  new tokens: a few minutes).

``--out benchmarks/results`` rewrites those reports; the shorter hardening and rollout
throughput runs go to ``quick/serve_hardening`` and ``quick/rollout_throughput``, and the
credit-assignment quick run always to ``results/quick`` (not committed), beside the committed
full results.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks import (
    alfworld_bench,
    credit_assignment,
    openenv_serve,
    rollout_overhead,
    rollout_throughput,
    serve_hardening,
    trainer_overhead,
    vector_bench,
    view_speed,
    webshop_bench,
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", type=int, default=0,
                        help="webshop_bench --large N (1200000 for the README's 1.2M rows)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write each benchmark's report to OUT/<name>/")
    args = parser.parse_args(argv)

    def out(name: str) -> list[str]:
        return ["--out", str(args.out / name)] if args.out else []

    webshop_bench.main((["--large", str(args.large)] if args.large else [])
                       + out("webshop_bench"))
    serve_hardening.main(["--seconds", "30"] + out("quick/serve_hardening"))
    vector_bench.main(out("vector_bench"))
    vector_bench.main(["--env", "alfworld", "--rounds", "2"] + out("vector_bench_alfworld"))
    rollout_overhead.main(out("rollout_overhead"))
    rollout_throughput.main(["--tasks", "2", "--copies", "4", "--max-new-tokens", "32",
                             "--max-steps", "3"] + out("quick/rollout_throughput"))
    alfworld_bench.main(out("alfworld_bench"))
    openenv_serve.main(out("openenv_serve"))  # gagpo serve env: 64 sessions x 2,000 steps
    trainer_overhead.main(out("trainer_overhead"))
    # gagpo view on 200 iterations x 1,000 steps (its report is one markdown file).
    view_speed.main(["--out", str(args.out / "view_speed.md")] if args.out else [])
    # The quick run writes beside, not over, the committed full results.
    credit_assignment.main(["--quick", "--out", str(credit_assignment.RESULTS / "quick")])


if __name__ == "__main__":
    main()
