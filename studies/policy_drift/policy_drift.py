"""How far a trained policy moved from its reference, and on which tokens.

``python -m studies.policy_drift.policy_drift --policy RUN/final --reference WARM/final
--trajectories EVAL/trajectories.jsonl`` scores the replies an evaluation recorded (``gagpo eval``'s
``trajectories.jsonl``: each step's prompt and reply token ids) under both models and prints:

- the per-token KL the trainer penalises (:func:`gagpo.losses.kl_low_var`, the k3 estimate of
  KL(policy || reference) on these tokens) and the mean log-ratio log pi - log pi_ref;
- how many tokens moved by more than one nat;
- the tokens that moved most, grouped by the token and the text just before it, with the
  rows they occur in and their mean log-probs under each model.

A run's ``loss/kl`` says how far the policy went; this says where. Both models must share
a tokenizer (the reference's is used to print tokens).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.record import command_line, recorded

CONTEXT_TOKENS = 6  # the text before a moved token that names it in the table


def read_rows(path: Path) -> list[dict]:
    """The steps of a ``trajectories.jsonl`` that carry prompt and reply token ids."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}: line {n} is not JSON ({e})") from e
            if not isinstance(row, dict) or not isinstance(row.get("prompt_token_ids"), list) \
                    or not isinstance(row.get("token_ids"), list):
                raise SystemExit(f"{path}: line {n} is not a step with prompt_token_ids and "
                                 f"token_ids (gagpo eval's trajectories.jsonl)")
            if row["prompt_token_ids"] and row["token_ids"]:
                rows.append(row)
    if not rows:
        raise SystemExit(f"{path}: no step with a prompt and a reply")
    return rows


@torch.no_grad()
def token_logprobs(model, prompts: list[list[int]], replies: list[list[int]], pad_id: int, *,
                   temperature: float, amp: torch.dtype | None) -> list[torch.Tensor]:
    """Each reply's per-token log-probs under ``model``, one prompt at a time (a prompt and
    its reply can be 1,000 tokens: this keeps memory to one sequence)."""
    from gagpo.logprobs import reply_logprobs

    out = []
    for prompt, reply in zip(prompts, replies, strict=True):
        logp, _, _ = reply_logprobs(model, [prompt], [reply], pad_id=pad_id,
                                    temperature=temperature, autocast_dtype=amp)
        out.append(logp[0, -len(reply):].float())
    return out


def drift(policy_lp: Sequence[torch.Tensor], reference_lp: Sequence[torch.Tensor],
          replies: Sequence[Sequence[int]], decode, top: int) -> dict:
    """Totals and the most-moved (context, token) groups; ``decode`` turns ids into text."""
    from gagpo.losses import kl_low_var

    tokens, kl, ratio, moved = 0, 0.0, 0.0, 0
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for lp, ref, reply in zip(policy_lp, reference_lp, replies, strict=True):
        d = lp - ref
        tokens += len(reply)
        kl += float(kl_low_var(lp, ref).sum())
        ratio += float(d.sum())
        moved += int((d.abs() > 1.0).sum())
        for j in (d.abs() > 1.0).nonzero()[:, 0].tolist():
            key = (decode(reply[max(0, j - CONTEXT_TOKENS):j]), decode(reply[j:j + 1]))
            groups[key].append((float(lp[j]), float(ref[j])))
    ranked = sorted(groups.items(), key=lambda kv: -sum(abs(p - r) for p, r in kv[1]))
    return {
        "rows": len(replies), "tokens": tokens, "kl": kl / tokens, "log_ratio": ratio / tokens,
        "moved": moved,
        "top": [{"before": before, "token": token, "count": len(v),
                 "policy": sum(p for p, _ in v) / len(v),
                 "reference": sum(r for _, r in v) / len(v)}
                for (before, token), v in ranked[:top]],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", required=True, help="the trained model (a folder or name)")
    parser.add_argument("--reference", required=True, help="the model it started from")
    parser.add_argument("--trajectories", type=Path, required=True,
                        help="gagpo eval's trajectories.jsonl (the replies to score)")
    parser.add_argument("--rows", type=int, default=48,
                        help="steps drawn at random (seeded) from the file; 0: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="log-probs as log_softmax(logits / T): the trainer's sampling "
                             "temperature, which its KL uses")
    parser.add_argument("--bf16", action="store_true", help="score under bf16 autocast")
    parser.add_argument("--top", type=int, default=10, help="moved tokens to list")
    parser.add_argument("--out", type=Path, help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    if args.rows < 0 or args.top < 0 or args.temperature <= 0:
        raise SystemExit("--rows and --top must be >= 0 and --temperature > 0")
    rows = read_rows(args.trajectories)
    if args.rows:
        random.Random(args.seed).shuffle(rows)
        rows = rows[:args.rows]

    from gagpo.agents.models import load_model

    policy, _ = load_model(args.policy, dtype="float32", device="cpu")
    reference, tok = load_model(args.reference, dtype="float32", device="cpu")
    vocab = min(policy.config.vocab_size, reference.config.vocab_size)
    prompts = [r["prompt_token_ids"] for r in rows]
    replies = [r["token_ids"] for r in rows]
    if any(t >= vocab or t < 0 for ids in prompts + replies for t in ids):
        raise SystemExit(f"{args.trajectories}: token ids beyond the models' vocabulary "
                         f"({vocab}): recorded with another tokenizer")
    amp = torch.bfloat16 if args.bf16 else None
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with recorded(args.out, command_line("studies.policy_drift.policy_drift", argv)):
        print(f"policy {args.policy} against reference {args.reference}, "
              f"{'bf16 autocast' if amp else 'float32'}, temperature {args.temperature:g}")
        policy_lp = token_logprobs(policy, prompts, replies, pad, temperature=args.temperature,
                                   amp=amp)
        reference_lp = token_logprobs(reference, prompts, replies, pad,
                                      temperature=args.temperature, amp=amp)
        result = drift(policy_lp, reference_lp, replies, tok.decode, args.top)
        print(f"replies: {result['rows']} steps of {args.trajectories.name}, "
              f"{result['tokens']} tokens")
        print(f"per-token KL (k3, as the trainer's loss): {result['kl']:.4f}; "
              f"mean log-ratio {result['log_ratio']:+.4f}")
        print(f"tokens whose log-prob moved by more than 1 nat: {result['moved']} "
              f"({result['moved'] / max(result['tokens'], 1):.1%})")
        if result["top"]:
            print("most moved (token after the text before it: rows, mean log-prob policy / "
                  "reference):")
        for g in result["top"]:
            print(f"  {g['token']!r} after {g['before']!r}: {g['count']}, "
                  f"{g['policy']:.2f} / {g['reference']:.2f}")


if __name__ == "__main__":
    main()
