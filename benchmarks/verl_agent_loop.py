"""The verl agent loop's cost per environment step, beside the environment's own step.

:class:`gagpo.integrations.verl.agent_loop.GymEnvAgentLoop` (``gagpo_env``) plays one episode
per instance, as verl's agent-loop worker runs it: ``--tasks`` train tasks x ``--copies``
copies (64 trajectories by default), all launched with ``asyncio.gather`` in one event loop.
The model is :class:`~gagpo.integrations.verl.scripted_server.ScriptedServer` (a random listed
action, seeded per copy; at ``--malformed`` a reply without one), so what is timed is the
loop itself: the prompt (our ReAct template, history fitted to ``rollout.prompt_length`` by
counting its tokens), verl's Continuous Token builder (chat template and tokenization, in the
event loop's thread pool), the fake server (decode the prompt, encode the reply), the parse,
the environment's step, the step record. The tokenizer is the tiny model's (BPE, 2048 tokens,
ChatML template; no download) unless ``--tokenizer`` names another.

Side by side in each repeat (each side goes first in turn, after one warm-up run):

* **loop**: wall time of the 64 trajectories / their steps (and the process's CPU time, which
  the thread pool can make exceed the wall time on a multi-core machine);
* **env**: the same action sequences (the records' ``action``) replayed through fresh
  ``gymnasium.make`` envs reset as the loop resets them, stepped in turn across trajectories;
  only ``env.step`` is timed (``gym.make``, ``reset`` and ``close`` are timed apart: the loop
  pays them once per trajectory). The replay checks it walks the same states (``state_key``)
  and ends where the records end;
* **server**: the fake server's own share, the records' ``metrics.generate_sequences``.

The figures are medians over ``--repeats``; the ratio is the median of each repeat's
loop/env ratio (a shared machine's noise hits one repeat, not one side). The per-step split
by subtraction (loop - server - env step - env reset) is what the loop adds; a last,
instrumented run splits that by component in CPU time (``time.thread_time`` around the
prompt build, the builder's two calls in its threads, the server, the parse and the step).

Needs verl (``pip install 'gagpo[verl]'``; here ``.venv-verl``):

    python -m benchmarks.verl_agent_loop [--env WebShop-v0|ALFWorld-v0] [--tasks 8]
        [--copies 8] [--repeats 3] [--malformed 0.2] [--history 2] [--tokenizer PATH]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import platform
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.record import command_line, machine, recorded

ENVS = ("WebShop-v0", "ALFWorld-v0")
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 256
COMPONENTS = ("prompt", "ct_build", "server", "ct_merge", "parse", "env_step")
"""The instrumented run's parts, in a step's order: ``ReActAgent.messages`` (template and the
history fit, which tokenizes the chat-formatted prompt), the builder's
``build_initial_tokens`` (chat template and tokenization again, in a pool thread), the
server's ``generate``, the builder's ``merge_assistant_tokens`` (pool thread),
``ReActAgent.parse``, and the loop's ``_step`` (env.step and the record)."""


def config(history: int) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": PROMPT_LENGTH,
                                          "response_length": RESPONSE_LENGTH}},
        "data": {"apply_chat_template_kwargs": {}}, "gagpo": {"history_length": history}})


def model_type(folder: str) -> str | None:
    """The root ``model_type`` of a model folder's config.json, which verl's worker hands the
    loop to pick its Continuous Token builder (None when there is none)."""
    try:
        return json.loads((Path(folder) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None


class Timer:
    """CPU seconds per component, from any thread (``list.append`` is atomic)."""

    def __init__(self) -> None:
        self.cpu: dict[str, list[float]] = defaultdict(list)
        self.prompts: list[list[dict]] = []  # the agent's messages, for render_and_encode

    def wrap(self, fn: Callable, name: str) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[name].append(time.thread_time() - started)

        return timed

    def wrap_async(self, fn: Callable, name: str) -> Callable:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            # The scripted server never awaits: its thread's CPU time is its own.
            started = time.thread_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.cpu[name].append(time.thread_time() - started)

        return timed

    def total(self, name: str) -> float:
        return sum(self.cpu.get(name, ()))


@contextmanager
def timed_agent(timer: Timer):
    """The loop's ReAct agent with its prompt build and parse timed (the module's name swapped
    for a subclass for the block's duration)."""
    import gagpo.integrations.verl.agent_loop as module

    base = module.ReActAgent

    class TimedAgent(base):  # type: ignore[misc, valid-type]
        def messages(self, *args: Any, **kwargs: Any) -> list[dict]:
            messages = timer.wrap(super().messages, "prompt")(*args, **kwargs)
            timer.prompts.append(messages)
            return messages

        def parse(self, *args: Any, **kwargs: Any) -> Any:
            return timer.wrap(super().parse, "parse")(*args, **kwargs)

    module.ReActAgent = TimedAgent
    try:
        yield
    finally:
        module.ReActAgent = base


async def play(env_id: str, tokenizer: Any, cfg: Any, hf_type: str | None, tasks: int,
               copies: int, malformed: float, timer: Timer | None) -> dict[str, Any]:
    """One run: ``tasks`` x ``copies`` trajectories gathered in this event loop."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gagpo.integrations.verl.agent_loop import GymEnvAgentLoop
    from gagpo.integrations.verl.scripted_server import ScriptedServer

    runs = []
    for task in range(tasks):
        for copy in range(copies):
            server = ScriptedServer(tokenizer, seed=task * copies + copy,
                                    malformed_rate=malformed)
            # Made in the running event loop: the loop keeps it for its thread-pool calls.
            loop = GymEnvAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server,
                                   tokenizer=tokenizer, processor=None,
                                   dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                                   hf_model_type=hf_type)
            if timer is not None:
                builder = loop.continuous_token_builder
                builder.build_initial_tokens = timer.wrap(builder.build_initial_tokens,
                                                          "ct_build")
                builder.merge_assistant_tokens = timer.wrap(builder.merge_assistant_tokens,
                                                            "ct_merge")
                server.generate = timer.wrap_async(server.generate, "server")
                loop._step = timer.wrap(loop._step, "env_step")
            runs.append((task, loop))
    rows = [{"data_source": env_id, "extra_info": {"task": task, "split": "train", "seed": 0,
                                                  "index": task}} for task, _ in runs]
    wall, cpu = time.perf_counter(), time.process_time()
    outputs = await asyncio.gather(*[loop.run({}, **row)
                                     for (_, loop), row in zip(runs, rows, strict=True)])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    steps = sum(len(o) for o in outputs)
    records = [[s.extra_fields["gagpo"] for s in o] for o in outputs]
    return {
        "wall_s": wall, "cpu_s": cpu, "steps": steps,
        "server_s": sum(s.metrics.generate_sequences for o in outputs for s in o),
        "step_metric_s": sum(s.metrics.tool_calls for o in outputs for s in o),
        "prompt_tokens": sum(len(s.prompt_ids) for o in outputs for s in o) / steps,
        "response_tokens": sum(len(s.response_ids) for o in outputs for s in o) / steps,
        "trajectories": [(task, recs) for (task, _), recs in zip(runs, records, strict=True)],
        "well_formed": sum(r["well_formed"] for recs in records for r in recs) / steps,
        "valid": sum(r["action_valid"] for recs in records for r in recs) / steps,
        "won": sum(recs[-1]["won"] for recs in records) / len(records),
    }


def run_loop(env_id: str, tokenizer: Any, cfg: Any, hf_type: str | None, args: Any,
             timer: Timer | None = None) -> dict[str, Any]:
    return asyncio.run(play(env_id, tokenizer, cfg, hf_type, args.tasks, args.copies,
                            args.malformed, timer))


def replay(env_id: str, trajectories: list[tuple[int, list[dict]]]) -> dict[str, Any]:
    """The records' actions through fresh envs, one step of each live trajectory in turn;
    only ``env.step`` timed (make, reset and close apart). Counts the steps where the replay
    leaves the records' path (another state, or an end where they go on)."""
    import gymnasium as gym

    import gagpo.envs  # noqa: F401  (registers the environments)
    from gagpo.agents.react import registered_max_steps

    limit = int(registered_max_steps(env_id))
    started = time.perf_counter()
    envs, infos = [], []
    for task, _ in trajectories:
        env = gym.make(env_id, max_steps=limit)
        _, info = env.reset(seed=0, options={"task": task, "split": "train"})
        envs.append(env)
        infos.append(info)
    setup = time.perf_counter() - started
    mismatches = sum(str(info.get("state_key", "")) != recs[0]["state_key"]
                     for info, (_, recs) in zip(infos, trajectories, strict=True))
    stepping, steps = 0.0, 0
    for t in range(max(len(recs) for _, recs in trajectories)):
        for env, (_, recs) in zip(envs, trajectories, strict=True):
            if t >= len(recs):
                continue
            record = recs[t]
            began = time.perf_counter()
            try:
                _, _, terminated, truncated, info = env.step(record["action"])
            except Exception:  # the loop records a raising step as failed
                stepping += time.perf_counter() - began
                steps += 1
                mismatches += not record["failed"]
                continue
            stepping += time.perf_counter() - began
            steps += 1
            ended = bool(terminated or truncated or t == limit - 1)
            if t + 1 < len(recs):
                mismatches += ended or str(info.get("state_key", "")) != recs[t + 1]["state_key"]
            else:
                mismatches += not ended or bool(info.get("won", False)) != record["won"]
    started = time.perf_counter()
    for env in envs:
        env.close()
    setup += time.perf_counter() - started
    return {"step_s": stepping, "setup_s": setup, "steps": steps, "mismatches": mismatches}


def render_and_encode(tokenizer: Any, prompts: list[list[dict]], most: int = 256
                      ) -> dict[str, float]:
    """CPU ms of the chat template's render and of the tokenizer's encode of one prompt
    (a sample of the run's prompts): the two halves of each of the prompt's two
    tokenizations a step (the agent's history fit, verl's builder)."""
    sample = prompts[::max(1, len(prompts) // most)][:most]
    started = time.thread_time()
    texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
             for m in sample]
    render = time.thread_time() - started
    started = time.thread_time()
    for text in texts:
        tokenizer(text, add_special_tokens=False)
    encode = time.thread_time() - started
    return {"render_ms": ms(render, len(sample)), "encode_ms": ms(encode, len(sample)),
            "prompts": len(sample)}


def actions(run: dict[str, Any]) -> list[list[str]]:
    return [[r["action"] for r in recs] for _, recs in run["trajectories"]]


def ms(seconds: float, steps: int) -> float:
    return 1000 * seconds / steps


def measure(env_id: str, tokenizer: Any, cfg: Any, hf_type: str | None,
            args: Any) -> dict[str, Any]:
    first = run_loop(env_id, tokenizer, cfg, hf_type, args)  # warm-up: catalogs, games, pool
    replay(env_id, first["trajectories"])
    per: dict[str, list[float]] = defaultdict(list)
    same_actions, mismatches = True, 0
    for r in range(args.repeats):
        for side in (("loop", "env") if r % 2 == 0 else ("env", "loop")):
            if side == "loop":
                run = run_loop(env_id, tokenizer, cfg, hf_type, args)
                same_actions &= actions(run) == actions(first)
            else:
                rep = replay(env_id, first["trajectories"])
                mismatches += rep["mismatches"]
        n = run["steps"]
        per["loop_ms"].append(ms(run["wall_s"], n))
        per["loop_cpu_ms"].append(ms(run["cpu_s"], n))
        per["server_ms"].append(ms(run["server_s"], n))
        per["step_metric_ms"].append(ms(run["step_metric_s"], n))
        per["env_ms"].append(ms(rep["step_s"], rep["steps"]))
        per["env_setup_ms"].append(ms(rep["setup_s"], rep["steps"]))
        per["ratio"].append(per["loop_ms"][-1] / per["env_ms"][-1])
        per["loop_own_ms"].append(per["loop_ms"][-1] - per["server_ms"][-1]
                                  - per["env_ms"][-1] - per["env_setup_ms"][-1])
    timer = Timer()
    with timed_agent(timer):
        inst = run_loop(env_id, tokenizer, cfg, hf_type, args, timer)
    n = inst["steps"]
    split = {name: ms(timer.total(name), n) for name in COMPONENTS}
    split["rest"] = ms(inst["cpu_s"], n) - sum(split.values())
    halves = render_and_encode(tokenizer, timer.prompts)
    median = {k: statistics.median(v) for k, v in per.items()}
    return {
        "env": env_id, "trajectories": args.tasks * args.copies, "steps": first["steps"],
        "steps_per_trajectory": first["steps"] / (args.tasks * args.copies),
        "prompt_tokens_mean": first["prompt_tokens"],
        "response_tokens_mean": first["response_tokens"],
        "well_formed": first["well_formed"], "action_valid": first["valid"],
        "won": first["won"], "same_actions_every_run": same_actions,
        "replay_mismatches": mismatches,
        **{f"{k}_median": v for k, v in median.items()},
        "server_share": median["server_ms"] / median["loop_ms"],
        "repeats": {k: [round(x, 4) for x in v] for k, v in per.items()},
        "cpu_split_ms": split, "cpu_split_total_ms": ms(inst["cpu_s"], n),
        "cpu_split_wall_ms": ms(inst["wall_s"], n), "tokenization_halves": halves,
    }


def rounded(value: Any) -> Any:
    """Floats to 6 significant digits, through dicts and lists."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def report(r: dict[str, Any]) -> str:
    s, total = r["cpu_split_ms"], r["cpu_split_total_ms"]
    own, h = r["loop_own_ms_median"], r["tokenization_halves"]
    parts = ", ".join(f"{k} {v:.3f} ({100 * v / total:.0f}%)" for k, v in s.items())
    return "\n".join([
        f"{r['env']}: {r['trajectories']} trajectories, {r['steps']} steps "
        f"({r['steps_per_trajectory']:.1f} a trajectory), prompt {r['prompt_tokens_mean']:.0f} "
        f"tokens and reply {r['response_tokens_mean']:.1f} a step on average; well-formed "
        f"{r['well_formed']:.2f}, valid {r['action_valid']:.2f}, won {r['won']:.2f}",
        f"  loop   {r['loop_ms_median']:.3f} ms/step wall "
        f"({r['loop_cpu_ms_median']:.3f} ms/step CPU, the pool's threads included)",
        f"  env    {r['env_ms_median']:.4f} ms/step (env.step alone, replayed); make+reset+close "
        f"{r['env_setup_ms_median']:.4f} ms/step spread over the trajectory",
        f"  ratio  loop/env {r['ratio_median']:.1f}x (median of the repeats' ratios)",
        f"  server {r['server_ms_median']:.3f} ms/step = {100 * r['server_share']:.0f}% of the "
        f"loop's wall time (the scripted model: decode the prompt, encode the reply; wall, so "
        f"with waits for the pool's threads); in CPU {s['server']:.3f} ms/step = "
        f"{100 * s['server'] / total:.0f}% of the loop's CPU",
        f"  loop without the server and the env (wall, by subtraction): "
        f"{own:.3f} ms/step = {own / r['env_ms_median']:.1f}x the env's step; "
        f"the loop's own timing of its step (env.step and the record, wall): "
        f"{r['step_metric_ms_median']:.4f} ms/step",
        f"  CPU split (instrumented run, ms/step, total {total:.3f} CPU against "
        f"{r['cpu_split_wall_ms']:.3f} wall): {parts}",
        f"  one prompt's chat-template render {h['render_ms']:.3f} ms, its encode "
        f"{h['encode_ms']:.3f} ms (CPU, {h['prompts']} of the run's prompts)",
        f"  checks: same actions every run {r['same_actions_every_run']}, replay mismatches "
        f"{r['replay_mismatches']}",
        f"  repeats: loop {r['repeats']['loop_ms']} ms/step, env {r['repeats']['env_ms']} "
        f"ms/step, ratio {r['repeats']['ratio']}",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", action="append", choices=ENVS, default=None,
                   help="environments (repeatable; default both)")
    p.add_argument("--tasks", type=int, default=8, help="train tasks 0..N-1")
    p.add_argument("--copies", type=int, default=8, help="trajectories per task")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (median)")
    p.add_argument("--malformed", type=float, default=0.2,
                   help="share of the scripted replies with no action")
    p.add_argument("--history", type=int, default=2, help="gagpo.history_length")
    p.add_argument("--tokenizer", default=None,
                   help="a local tokenizer folder (default: the tiny model's)")
    p.add_argument("--out", type=Path, default=None, help="write report.txt and summary.json")
    args = p.parse_args(argv)

    from gagpo.integrations.verl import require_verl

    verl_version = require_verl()
    import transformers
    from transformers import AutoTokenizer

    from gagpo.agents.models import TinySpec, tiny_model_folder

    # One "no model-specific builder" warning per loop instance otherwise.
    logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)
    folder = args.tokenizer or tiny_model_folder(TinySpec())
    label = args.tokenizer or "tiny"  # a name, not this machine's cache folder
    tokenizer = AutoTokenizer.from_pretrained(folder)
    hf_type, cfg = model_type(folder), config(args.history)
    command = command_line("benchmarks.verl_agent_loop", argv)
    results = []
    with recorded(args.out, command):
        print(f"verl {verl_version}, transformers {transformers.__version__}; "
              f"processor {platform.processor() or platform.machine()!r}, "
              f"{os.cpu_count()} CPUs; tokenizer {label} (model_type {hf_type}, "
              f"{len(tokenizer)} tokens)")
        print(f"GymEnvAgentLoop with ScriptedServer (malformed {args.malformed:g}), "
              f"{args.tasks} tasks x {args.copies} copies gathered in one event loop; "
              f"history {args.history}, prompt_length {PROMPT_LENGTH}; "
              f"median of {args.repeats} repeats after a warm-up", flush=True)
        for env_id in args.env or ENVS:
            results.append(measure(env_id, tokenizer, cfg, hf_type, args))
            print(report(results[-1]), flush=True)
    if args.out:
        summary = {
            "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "processor": platform.processor(),
            "arch": platform.machine(), "cpus": os.cpu_count(),
            "verl": verl_version, "transformers": transformers.__version__,
            "tokenizer": label, "model_type": hf_type,
            "settings": {"tasks": args.tasks, "copies": args.copies, "repeats": args.repeats,
                         "malformed": args.malformed, "history_length": args.history,
                         "prompt_length": PROMPT_LENGTH, "response_length": RESPONSE_LENGTH},
            "envs": rounded(results),
        }
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    ok = all(r["same_actions_every_run"] and not r["replay_mismatches"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
