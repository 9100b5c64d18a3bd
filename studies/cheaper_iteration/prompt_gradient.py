"""How much of the policy gradient flows through the prompt: would an update that held the
prompt's activations constant learn what the trainer's update learns?

An update step runs the model over every row's prompt and reply and back-propagates the reply
tokens' loss through both, although the prompt is most of the tokens (a WebShop page and
its history against a reply of a few dozen tokens). Holding the prompt constant (its keys and
values computed without a graph, as a rollout's cache already holds them) would run forward
and backward on the replies alone; but the gradient would lose every path through the
prompt's positions. This measures that loss on
recorded rows:

``python -m studies.cheaper_iteration.prompt_gradient --model WARM/final --trajectories
EVAL/trajectories.jsonl`` draws ``--rows`` steps of ``gagpo eval``'s ``trajectories.jsonl``
(each step's prompt and reply token ids), gives each an advantage of random sign and size
(seeded), and computes the
gradient of the policy loss -sum(A * log pi(reply | prompt)) / tokens over every weight twice:

- **true**: the trainer's pass (:func:`gagpo.logprobs.reply_logprobs`) over prompt and reply;
- **prompt held**: the prompt but its last token run without a graph into a cache, then the
  prompt's last token and the reply with gradients (the last prompt token predicts the reply's
  first, so it stays in the graph).

It prints the log-probs' largest difference (the two passes compute the same function), the
cosine between the two gradients and their norms' ratio over all weights and per decoder layer,
and each pass's time. A cosine near 1 would make the cheaper update a candidate at equal
learning; well below 1, it is another update.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.record import command_line, recorded
from studies.policy_drift.policy_drift import read_rows


def held_prompt_logprobs(model, prompt: Sequence[int], reply: Sequence[int]) -> torch.Tensor:
    """log pi(reply token | prompt, earlier reply tokens) with ``prompt[:-1]`` run without a
    graph: gradients reach the weights through the last prompt token's and the reply's
    positions only."""
    from gagpo.agents.policies.kv_cache import cache_keyword, returned_cache

    device = next(model.parameters()).device
    head = len(prompt) - 1
    kwargs = {}
    if head:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([list(prompt[:-1])], device=device),
                        use_cache=True, logits_to_keep=1)
        kwargs = {cache_keyword(model): returned_cache(out)}
    ids = torch.tensor([[prompt[-1], *reply[:-1]]], device=device)
    positions = torch.arange(head, head + len(reply), device=device)[None]
    logits = model(input_ids=ids, position_ids=positions, use_cache=bool(head), **kwargs).logits
    target = torch.tensor(list(reply), device=device)
    return F.log_softmax(logits[0].float(), dim=-1).gather(-1, target[:, None])[:, 0]


def true_logprobs(model, prompt: Sequence[int], reply: Sequence[int], pad_id: int
                  ) -> torch.Tensor:
    """The trainer's log-probs of ``reply`` after ``prompt``, with the whole graph."""
    from gagpo.logprobs import reply_logprobs

    logp, _, _ = reply_logprobs(model, [prompt], [reply], pad_id=pad_id)
    return logp[0, -len(reply):]


def gradient(model, rows: Sequence[dict], advantages: Sequence[float], held: bool,
             pad_id: int) -> tuple[dict[str, torch.Tensor], list[torch.Tensor], float]:
    """Each weight's gradient of -sum(A * log pi) / reply tokens, the rows' log-probs and the
    seconds the passes took."""
    tokens = sum(len(r["token_ids"]) for r in rows)
    model.zero_grad(set_to_none=True)
    logps = []
    started = time.perf_counter()
    for row, adv in zip(rows, advantages, strict=True):
        prompt, reply = row["prompt_token_ids"], row["token_ids"]
        logp = (held_prompt_logprobs(model, prompt, reply) if held
                else true_logprobs(model, prompt, reply, pad_id))
        (-adv * logp.sum() / tokens).backward()
        logps.append(logp.detach())
    seconds = time.perf_counter() - started
    grads = {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
             for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    return grads, logps, seconds


def layer_of(name: str) -> str:
    """``layer 07`` for a decoder layer's weight, else the weight's own role."""
    if ".layers." in name:
        return f"layer {int(name.split('.layers.')[1].split('.')[0]):02d}"
    return "embedding" if "embed" in name else "final norm and output"


def agreement(true: dict[str, torch.Tensor], held: dict[str, torch.Tensor]
              ) -> dict[str, tuple[float, float]]:
    """(cosine, norm of held / norm of true) over all weights (``all``) and per
    :func:`layer_of` group."""
    sums: dict[str, list[float]] = {}
    for name, g in true.items():
        h = held[name]
        for key in ("all", layer_of(name)):
            s = sums.setdefault(key, [0.0, 0.0, 0.0])
            s[0] += float((g * h).sum())
            s[1] += float((g * g).sum())
            s[2] += float((h * h).sum())
    out = {}
    for key, (gh, gg, hh) in sums.items():
        cos = gh / (gg * hh) ** 0.5 if gg > 0 and hh > 0 else float("nan")
        out[key] = (cos, (hh / gg) ** 0.5 if gg > 0 else float("nan"))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model whose gradient is taken")
    parser.add_argument("--trajectories", type=Path, required=True,
                        help="gagpo eval's trajectories.jsonl (the rows)")
    parser.add_argument("--rows", type=int, default=16,
                        help="steps drawn at random (seeded) from the file; 0: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    if args.rows < 0:
        raise SystemExit("--rows must be >= 0")
    rows = read_rows(args.trajectories)
    rng = random.Random(args.seed)
    if args.rows:
        rng.shuffle(rows)
        rows = rows[:args.rows]
    advantages = [rng.choice((-1.0, 1.0)) * (0.5 + rng.random()) for _ in rows]

    from gagpo.agents.models import load_model

    model, tok = load_model(args.model, dtype="float32", device="cpu")
    vocab = model.config.vocab_size
    if any(t >= vocab or t < 0 for r in rows for t in r["prompt_token_ids"] + r["token_ids"]):
        raise SystemExit(f"{args.trajectories}: token ids beyond the model's vocabulary "
                         f"({vocab}): recorded with another tokenizer")
    model.train()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with recorded(args.out, command_line("studies.cheaper_iteration.prompt_gradient", argv)):
        prompt_tokens = sum(len(r["prompt_token_ids"]) for r in rows)
        reply_tokens = sum(len(r["token_ids"]) for r in rows)
        print(f"{args.model}: {len(rows)} steps of {args.trajectories.name} (seed {args.seed}), "
              f"{prompt_tokens} prompt and {reply_tokens} reply tokens, float32, "
              f"{torch.get_num_threads()} torch thread(s)")
        true, true_lp, t_true = gradient(model, rows, advantages, held=False, pad_id=pad)
        held, held_lp, t_held = gradient(model, rows, advantages, held=True, pad_id=pad)
        gap = max(float((a - b).abs().max()) for a, b in zip(true_lp, held_lp, strict=True))
        print(f"log-probs: largest difference between the passes {gap:.1e}")
        print(f"time: true {t_true:.1f} s, prompt held {t_held:.1f} s "
              f"({t_true / max(t_held, 1e-9):.2f}x)")
        print("gradient of the prompt-held pass against the true one "
              "(cosine, norm ratio held / true):")
        for key, (cos, ratio) in sorted(agreement(true, held).items(),
                                        key=lambda kv: (kv[0] != "all", kv[0])):
            print(f"  {key:24s} cosine {cos:.3f}  norm ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
