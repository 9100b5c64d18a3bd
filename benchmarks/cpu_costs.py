"""What a rollout's forward passes cost on this CPU, piece by piece: the figures behind the
rollout benchmark's ratios and its bound.

* products: float32 matrix products of a decoder layer's shapes (``--tokens`` rows), in GFLOP/s:
  the ceiling of a compute-bound prefill;
* prefill: ``--prompts`` random prompts of 600-1,000 tokens (``--lengths``) through the
  transformers policy (``max_new_tokens=1``), in one padded pass and each prompt alone
  (``prefill_alone``), in prompt tokens/s;
* decode: one decoding step at ``--rows`` rows of an 800-token prompt, in ms and tokens/s, and
  at 16 rows the share of the step in matrix products and in attention (torch's profiler);
* sampling: drawing each row's next token from its probabilities over the model's vocabulary,
  ``torch.multinomial`` against the policy's draw (:func:`gagpo.agents.policies.hf.draw`),
  in ms a decoding step at ``--rows`` rows.

    python -m benchmarks.cpu_costs [--model smollm2-135m] [--prompts 16] [--rows 8,16,32,64]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.record import command_line, recorded


def product_rate(tokens: int, shapes: list[tuple[int, int]], repeats: int = 5) -> float:
    """Float32 GFLOP/s of ``tokens`` x K @ K x N products, best of ``repeats`` rounds."""
    import torch

    pairs = [(torch.randn(tokens, k), torch.randn(k, n)) for k, n in shapes]
    flops = sum(2 * tokens * k * n for k, n in shapes)
    best = float("inf")
    for _ in range(repeats + 1):  # the first round warms up
        started = time.perf_counter()
        for a, b in pairs:
            torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return flops / best / 1e9


def prefill_rates(model: Any, tok: Any, prompts: list[list[int]]) -> dict[str, float]:
    """Prompt tokens/s of one padded pass and of each prompt alone, through the policy."""
    from gagpo.agents.policies.hf import TransformersPolicy

    rates = {}
    for name, alone in (("padded", False), ("alone", True)):
        policy = TransformersPolicy(model, tok, max_new_tokens=1, batch_size=len(prompts),
                                    seed=0, prefill_alone=alone)
        policy.generate_ids([p[:8] for p in prompts[:2]])  # warm up
        policy.stats.prefill_seconds = 0.0
        policy.generate_ids(prompts)
        rates[name] = sum(map(len, prompts)) / policy.stats.prefill_seconds
    return rates


def decode_step(model: Any, rows: int, context: int, steps: int = 8,
                profile: bool = False) -> tuple[float, dict[str, float]]:
    """Median seconds of one decoding step of ``rows`` rows after a ``context``-token prompt
    (the policy's reserved cache and decode attention), and with ``profile`` the seconds per
    step in matrix products and in attention."""
    import torch

    from gagpo.agents.policies.kv_cache import (
        cache_keyword,
        gagpo_attention,
        new_cache,
        returned_cache,
    )

    generator = torch.Generator().manual_seed(0)
    vocab = min(10_000, model.config.vocab_size)
    prompt = torch.randint(100, vocab, (1, context), generator=generator)
    tokens = torch.randint(100, vocab, (rows, 1), generator=generator)
    times: list[float] = []
    split: dict[str, float] = {}
    with torch.no_grad(), gagpo_attention(model):
        kw = cache_keyword(model)
        cache = returned_cache(model(input_ids=prompt, use_cache=True, logits_to_keep=1,
                                     **{kw: new_cache(steps + 1)}))
        cache.batch_repeat_interleave(rows)
        mask = torch.ones(rows, context + 1, dtype=torch.long)
        positions = torch.full((rows, 1), context)
        for _ in range(steps):
            started = time.perf_counter()
            model(input_ids=tokens, attention_mask=mask, position_ids=positions,
                  use_cache=True, **{kw: cache})
            times.append(time.perf_counter() - started)
            cache.crop(-1)  # the same step again: the same context
        if profile:
            from torch.profiler import profile as torch_profile

            with torch_profile() as prof:
                for _ in range(3):
                    model(input_ids=tokens, attention_mask=mask, position_ids=positions,
                          use_cache=True, **{kw: cache})
                    cache.crop(-1)
            for event in prof.key_averages():
                kind = "products" if event.key in ("aten::mm", "aten::addmm") else \
                    "attention" if "scaled_dot_product" in event.key else None
                if kind:
                    split[kind] = split.get(kind, 0.0) + event.self_cpu_time_total / 1e6 / 3
    return statistics.median(times[1:]), split


def sampling_ms(rows: int, vocab: int, repeats: int = 20) -> dict[str, float]:
    """Median ms to draw one token per row from ``rows`` x ``vocab`` probabilities (a softmax
    of random logits): ``torch.multinomial`` and the policy's :func:`draw`, in turns."""
    import torch

    from gagpo.agents.policies.hf import draw

    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(3 * torch.randn(rows, vocab, generator=generator), dim=-1)
    ways = {"multinomial": lambda: torch.multinomial(probs, 1, generator=generator),
            "draw": lambda: draw(probs, torch.rand(rows, generator=generator))}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats + 1):  # the first round warms up
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - started)
    return {name: 1000 * statistics.median(t[1:]) for name, t in times.items()}


def lengths_pair(text: str) -> tuple[int, int]:
    """``--lengths``: ``SHORTEST,LONGEST``, positive, in order."""
    try:
        low, high = (int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SHORTEST,LONGEST, got {text!r}") from None
    if not 0 < low <= high:
        raise argparse.ArgumentTypeError(f"expected 0 < SHORTEST <= LONGEST, got {text!r}")
    return low, high


def measure(args: argparse.Namespace) -> dict[str, float]:
    import torch

    from gagpo.agents.models import load_model

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    model, tok = load_model(args.model, device="cpu")
    config = model.config
    hidden, inner = config.hidden_size, config.intermediate_size
    kv = config.num_key_value_heads * (hidden // config.num_attention_heads)
    print(f"{args.model}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, "
          f"float32, {torch.get_num_threads()} torch thread(s)")
    figures: dict[str, float] = {}
    shapes = [(hidden, hidden), (hidden, kv), (hidden, kv), (hidden, hidden), (hidden, inner),
              (hidden, inner), (inner, hidden)]
    figures["products_gflops"] = product_rate(args.tokens, shapes)
    print(f"products: a layer's float32 products on {args.tokens} tokens: "
          f"{figures['products_gflops']:.0f} GFLOP/s")
    rng = random.Random(0)
    low, high = args.lengths
    prompts = [[rng.randrange(100, min(10_000, len(tok))) for _ in range(rng.randint(low, high))]
               for _ in range(args.prompts)]
    rates = prefill_rates(model, tok, prompts)
    figures.update(prefill_padded=rates["padded"], prefill_alone=rates["alone"])
    print(f"prefill: {args.prompts} prompts of {low}-{high} tokens ({sum(map(len, prompts))} in "
          f"all): one padded pass {rates['padded']:.0f} tok/s, each alone "
          f"{rates['alone']:.0f} tok/s ({rates['alone'] / rates['padded']:.2f}x)")
    for rows in args.rows:
        seconds, split = decode_step(model, rows, args.context, profile=rows == 16)
        figures[f"decode_ms_{rows}"] = 1000 * seconds
        line = (f"decode: {rows} rows of a {args.context}-token prompt: "
                f"{1000 * seconds:.0f} ms a step, {rows / seconds:.0f} tok/s")
        if split:
            line += "; per step " + ", ".join(f"{kind} {1000 * s:.0f} ms"
                                              for kind, s in sorted(split.items()))
            figures.update({f"decode_16_{kind}_ms": 1000 * s for kind, s in split.items()})
        print(line)
    for rows in args.rows:
        ms = sampling_ms(rows, config.vocab_size)
        figures.update({f"sampling_ms_{rows}_{name}": v for name, v in ms.items()})
        print(f"sampling: {rows} rows of {config.vocab_size} probabilities: torch.multinomial "
              f"{ms['multinomial']:.2f} ms, draw {ms['draw']:.2f} ms "
              f"({ms['multinomial'] / ms['draw']:.1f}x)")
    return figures


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the products'
    GFLOP/s, prefill tokens/s padded and alone, and per decoding batch size its ms a step and
    tokens/s (``decode``: ``{rows: {"step_ms", "tok_per_s"}}``).

    Raises:
        ValueError: the report has no decoding line.
    """
    out: dict[str, Any] = {"decode": {}}
    if m := re.search(r"^products: .*?: ([\d.]+) GFLOP/s", report, re.M):
        out["products_gflops"] = float(m[1])
    if m := re.search(r"^prefill: .*?one padded pass ([\d.]+) tok/s, each alone ([\d.]+) tok/s",
                      report, re.M):
        out["prefill_padded_tok_per_s"], out["prefill_alone_tok_per_s"] = float(m[1]), float(m[2])
    for m in re.finditer(r"^decode: (\d+) rows of .*?: ([\d.]+) ms a step, ([\d.]+) tok/s",
                         report, re.M):
        out["decode"][m[1]] = {"step_ms": float(m[2]), "tok_per_s": float(m[3])}
    if not out["decode"]:
        raise ValueError("not a cpu_costs report: no 'decode: N rows ...' line")
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--lengths", type=lengths_pair, default=(600, 1000),
                        help="the prefill prompts' SHORTEST,LONGEST token counts")
    parser.add_argument("--tokens", type=int, default=4096, help="rows of the products")
    parser.add_argument("--context", type=int, default=800, help="decoding's prompt length")
    parser.add_argument("--rows", type=lambda text: [int(r) for r in text.split(",")],
                        default=[8, 16, 32, 64], help="comma-separated decoding batch sizes")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.cpu_costs", argv), summarize):
        return measure(args)


if __name__ == "__main__":
    main()
