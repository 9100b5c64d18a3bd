"""What shorter prompts could save a WebShop RL iteration: a step's prompt tokens with less
history.

A training row is a step's prompt and reply, and the prompt is most of the update's tokens
(``studies.cheaper_iteration.iteration_time``: 69,110 update tokens for 100 steps). The ReAct
prompt holds the task, the last ``history_length`` (observation, action) pairs, the page and its
actions. This plays WebShop episodes (the expert's action with probability ``--expert``, else a
uniformly drawn admissible one, seeded: a policy that wanders as a warm start does) and counts,
at every
step, the chat-formatted prompt's tokens in SmolLM2's template for each history length, as
:class:`gagpo.agents.react.ReActAgent` builds it for training (``--max-prompt-tokens 1024``).

    python -m studies.cheaper_iteration.prompt_share --episodes 40 \
        --out studies/cheaper_iteration/results/prompt_share

The update's time is about proportional to its tokens, so ``1 - tokens(h) / tokens(2)`` bounds
what history ``h`` saves of the update (and of the rollout's prefill); the policy then sees
less, so its learning would need its own seeds.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence

from benchmarks.record import command_line, recorded

HISTORY_LENGTHS = (2, 1, 0)


def prompt_tokens(episodes: int, expert: float, seed: int, max_steps: int = 10,
                  model: str = "smollm2-135m", max_prompt_tokens: int = 1024
                  ) -> tuple[int, dict[int, int]]:
    """Steps played and, per history length, the prompt tokens summed over those steps (history
    dropped oldest first where a prompt would pass ``max_prompt_tokens``, as in training)."""
    import gymnasium as gym

    import gagpo.envs  # noqa: F401  (registers WebShop-v0)
    from gagpo.agents.models import load_model
    from gagpo.agents.react import ReActAgent

    _, tokenizer = load_model(model, device="cpu")
    rng = random.Random(seed)
    totals = dict.fromkeys(HISTORY_LENGTHS, 0)
    steps = 0
    env = gym.make("WebShop-v0", max_steps=max_steps, request_infos=["expert_action"])
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        agents = {h: ReActAgent("WebShop-v0", h, max_prompt_tokens=max_prompt_tokens,
                                tokenizer=tokenizer, max_steps=max_steps)
                  for h in HISTORY_LENGTHS}
        done = False
        while not done:
            for h, agent in agents.items():
                totals[h] += agent.prompt_length(agent.messages(0, obs, info))
            steps += 1
            action = (info["expert_action"] if rng.random() < expert
                      else rng.choice(list(info["admissible_actions"])))
            for agent in agents.values():
                agent.observe(0, obs, action)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
    env.close()
    return steps, totals


def report(steps: int, totals: dict[int, int]) -> str:
    base = totals[HISTORY_LENGTHS[0]]
    lines = [f"{steps} steps", "", "| history pairs | prompt tokens a step | of history 2's |",
             "|---|---|---|"]
    lines += [f"| {h} | {totals[h] / steps:.0f} | {totals[h] / base:.1%} |" for h in totals]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--expert", type=float, default=0.7,
                        help="probability of the expert's action at a step (else a random "
                             "admissible one)")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--model", default="smollm2-135m", help="whose tokenizer counts")
    parser.add_argument("--out", help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    if not 0 <= args.expert <= 1:
        parser.error("--expert must be in [0, 1]")
    with recorded(args.out, command_line("studies.cheaper_iteration.prompt_share", argv)):
        print(report(*prompt_tokens(args.episodes, args.expert, args.seed, model=args.model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
