"""``make bench``: every benchmark, one after another, each printing its figures.

    python -m benchmarks.run_all [--large N] [--out DIR]

The figures of docs/benchmarks.md are the committed reports in ``benchmarks/results/<name>/``
(``report.txt``: the command, the machine and the output; a variant of a benchmark, run with
other flags or on another machine, in ``<name>/<variant>/``, such as ``vector_bench/alfworld``).
One-off studies (``studies/``) are frozen and not run here. The reports come from this run,
except:

- the WebShop rows for 1.2M products (search latency, serving memory, generate / convert /
  index, reopening a cached catalog) need ``--large 1200000``: a catalog of that size is
  generated, converted and indexed on first use (about ten minutes and several GB of memory,
  then cached under the gagpo cache);
- the trainer's overhead in the demo's run is read from ``make demo``'s metrics
  (``python -m benchmarks.trainer_overhead --from-run runs/demo``);
- the served shop's figures are ``serve_hardening --seconds 60``'s (here a 30-second load phase);
- the rollout throughput of SmolLM2-135M (today's transformers path against the shared prefill)
  is ``rollout_throughput``'s with its recorded settings (here 2 tasks x 4 copies, 3 steps, 32
  new tokens: a few minutes), and ``cpu_costs``'s is on the warm-started model (here
  SmolLM2-135M-Instruct itself, written to ``quick/cpu_costs``).

A benchmark that fails (its exit code, or an exception) is reported and the others still
run; ``make bench`` then exits 1 with the failed ones named. ``--out benchmarks/results``
rewrites those reports; the shorter hardening and rollout
throughput runs go to ``quick/serve_hardening`` and ``quick/rollout_throughput``, and the
credit-assignment quick run always to ``results/quick`` (not committed), beside the committed
full results.
"""

from __future__ import annotations

import argparse
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import (
    alfworld_bench,
    cpu_costs,
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


def run(name: str, main: Callable[[list[str]], object], argv: list[str],
        failures: list[str]) -> None:
    """One benchmark's ``main(argv)``. Its failure (an exit code of 1 returned, a SystemExit
    other than 0, an exception) is reported and noted, and the next benchmark runs."""
    print(f"\n=== {name} {' '.join(argv)}", flush=True)
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse errors and refusals
        code = stop.code
    except Exception:  # noqa: BLE001 - reported, and the run goes on to the next benchmark
        traceback.print_exc()
        code = "an exception"
    # Only an int exit code or a message is a failure (some mains return their figures).
    if (isinstance(code, int) and not isinstance(code, bool) and code != 0) \
            or isinstance(code, str):
        print(f"=== {name} FAILED ({code})", flush=True)
        failures.append(name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", type=int, default=0,
                        help="webshop_bench --large N (1200000 for docs/benchmarks.md's 1.2M rows)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write each benchmark's report to OUT/<name>/")
    args = parser.parse_args(argv)

    def out(name: str) -> list[str]:
        return ["--out", str(args.out / name)] if args.out else []

    failures: list[str] = []
    run("webshop_bench", webshop_bench.main,
        (["--large", str(args.large)] if args.large else []) + out("webshop_bench"), failures)
    run("serve_hardening", serve_hardening.main,
        ["--seconds", "30"] + out("quick/serve_hardening"), failures)
    run("vector_bench", vector_bench.main, out("vector_bench"), failures)
    run("vector_bench_alfworld", vector_bench.main,
        ["--env", "alfworld", "--rounds", "2"] + out("vector_bench/alfworld"), failures)
    run("rollout_overhead", rollout_overhead.main, out("rollout_overhead"), failures)
    run("rollout_throughput", rollout_throughput.main,
        ["--tasks", "2", "--copies", "4", "--max-new-tokens", "32", "--max-steps", "3"]
        + out("quick/rollout_throughput"), failures)
    # The pieces of a rollout's cost on this CPU (SmolLM2-135M itself; docs/benchmarks.md quotes the
    # warm-started model's run, the same shapes).
    run("cpu_costs", cpu_costs.main, out("quick/cpu_costs"), failures)
    run("alfworld_bench", alfworld_bench.main, out("alfworld_bench"), failures)
    # gagpo serve env: 64 sessions x 2,000 steps
    run("openenv_serve", openenv_serve.main, out("openenv_serve"), failures)
    run("trainer_overhead", trainer_overhead.main, out("trainer_overhead"), failures)
    # gagpo view on 200 iterations x 1,000 steps (its report is one markdown file).
    run("view_speed", view_speed.main,
        ["--out", str(args.out / "view_speed.md")] if args.out else [], failures)
    # The quick run writes beside, not over, the committed full results.
    run("credit_assignment", credit_assignment.main,
        ["--quick", "--out", str(credit_assignment.RESULTS / "quick")], failures)
    if failures:
        print(f"\nfailed: {', '.join(failures)}", flush=True)
        return 1
    print("\nevery benchmark ran", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
