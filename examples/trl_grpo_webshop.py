"""Train a small model with TRL's GRPOTrainer on WebShop-v0, served over OpenEnv.

The shop runs as a ``gagpo serve env`` server (started here in a thread, or yours with
``--url``); each rollout plays one session through
:class:`gagpo.integrations.trl.WebShopTools`, whose ``search(query)`` and ``click(element)`` are
the model's tools, and is rewarded with the episode's score::

    pip install 'gagpo[agents,openenv,trl]'
    python examples/trl_grpo_webshop.py --steps 5
    gagpo serve env --env WebShop-v0 --port 8000 &      # or serve it yourself
    python examples/trl_grpo_webshop.py --url http://127.0.0.1:8000 --model smollm2-135m

An untrained model never writes a tool call GRPOTrainer can parse (Qwen3's
``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, which TRL parses with the response
template it sets for that chat template), so every rollout would score 0 and GRPO would have
nothing to compare. A warm start first teaches the expert's episodes of the training tasks
(``--tasks``, default 4) with the loss on the model's turns, laid out token for token as
GRPOTrainer lays them out: its training chat template, its tool order (by name), the tools'
answers between the turns. On a CPU with the built-in 134k-parameter ``tiny`` model the warm
start takes a few minutes and a GRPO step seconds; the tiny model then calls the tools
(``tools/call_frequency`` 2-3 per rollout) and buys the right product in most rollouts (the
logged ``rewards/WebShopTools/mean`` is the env's score). It has memorised those tasks, not
learnt to shop: the point is the whole loop (prompt, tool calls against the server, score as
reward, update). A model that knows tool calling (``--model``) starts from better.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import tempfile
from functools import partial

SYSTEM = ("You shop for a customer. Call the tools search(query) and click(element) one at a "
          "time until you buy the right product with click('Buy Now').")


def tool_chat_template(tokenizer) -> None:
    """Give a tokenizer without tool support TRL's Qwen3 template (ChatML with <tool_call>
    tags, which TRL knows how to parse); leave one that renders tool calls as it is."""
    from trl.chat_template_utils import qwen3_chat_template, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        tokenizer.chat_template = qwen3_chat_template


def tool_methods(env) -> list:
    """The env's tools in the order GRPOTrainer lists them (its public methods but ``reset``
    and ``get_reward``, by name): the order changes the prompt, which the warm start must
    render exactly as TRL does."""
    return [getattr(env, name) for name, _ in inspect.getmembers(type(env), inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")]


def trl_chat_template(tokenizer) -> str | None:
    """The template GRPOTrainer renders tool conversations with: the tokenizer's own when it is
    prefix-preserving (None), else TRL's training version of it (Qwen3's is not: it drops
    earlier turns' thinking)."""
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    if is_chat_template_prefix_preserving(tokenizer):
        return None
    return get_training_chat_template(tokenizer)


def expert_episodes(tokenizer, rows, moves: int | None = None):
    """Each row's expert episode as GRPOTrainer would lay it out, as (ids, labels): the prompt
    as TRL renders it after ``reset`` (its template, its tool order, the observation appended
    to the last user message), then per move the expert's tool call up to the end token
    (labelled) and the tool's answer in the template (not labelled, as TRL masks it), for the
    first ``moves`` moves (default: the whole episode, to the purchase)."""
    from functools import partial

    from gagpo.integrations.trl import WebShopTools

    env = WebShopTools(request_infos=["expert_action"])
    tools, template = tool_methods(env), trl_chat_template(tokenizer)
    render = partial(tokenizer.apply_chat_template, tools=tools, chat_template=template,
                     tokenize=False)
    eos = tokenizer.eos_token
    episodes = []
    for row in rows:
        first = env.reset(task=row["task"], split=row["split"], seed=row["seed"])
        messages = [*row["prompt"][:-1],
                    {**row["prompt"][-1], "content": row["prompt"][-1]["content"] + first}]
        text = render(messages, add_generation_prompt=True)
        ids = list(tokenizer.apply_chat_template(
            messages, tools=tools, chat_template=template, add_generation_prompt=True,
            tokenize=True, return_dict=True)["input_ids"])
        labels = [-100] * len(ids)
        done = 0
        while moves is None or done < moves:
            name, arg = env._info["expert_action"][:-1].split("[", 1)
            argument = "query" if name == "search" else "element"
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": {argument: arg}}}]})
            reply = render(messages)[len(text):]
            reply = reply[:reply.index(eos) + len(eos)]
            reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
            ids += reply_ids
            labels += reply_ids
            messages.append({"role": "tool", "name": name, "content": getattr(env, name)(arg)})
            done += 1
            if env._over or done == moves:
                break
            following = render(messages, add_generation_prompt=True)
            assert following.startswith(text + reply), "the template does not preserve prefixes"
            answer = tokenizer(following[len(text + reply):], add_special_tokens=False)["input_ids"]
            ids += answer
            labels += [-100] * len(answer)
            text = following
        episodes.append((ids, labels))
    env._shutdown()
    return episodes


def warm_start(model, tokenizer, rows, steps: int, lr: float = 3e-3,
               moves: int | None = None) -> float:
    """Teach the model the tool-call format and the expert's moves: a short supervised run on
    :func:`expert_episodes` (the loss on the model's own turns only). An untrained model never
    calls a tool, so GRPO would have nothing to compare. Returns the last loss."""
    import torch

    episodes = expert_episodes(tokenizer, rows, moves)
    width = max(len(ids) for ids, _ in episodes)
    ids = torch.full((len(episodes), width), tokenizer.pad_token_id)
    labels = torch.full((len(episodes), width), -100)
    mask = torch.zeros((len(episodes), width), dtype=torch.long)
    for i, (row_ids, row_labels) in enumerate(episodes):  # right-padded
        ids[i, :len(row_ids)] = torch.tensor(row_ids)
        labels[i, :len(row_ids)] = torch.tensor(row_labels)
        mask[i, :len(row_ids)] = 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = float("nan")
    for _ in range(steps):
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss = float(out.loss.detach())
    return loss


def dataset(n_tasks: int, split: str = "train"):
    """One row per task: the prompt, and the columns WebShopTools.reset reads."""
    from datasets import Dataset

    from gagpo.envs import split_tasks

    tasks = split_tasks("WebShop-v0", split)[:n_tasks]
    return Dataset.from_list([
        {"prompt": [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "Find and buy what this customer asks for."}],
         "task": int(task), "split": split, "seed": i}
        for i, task in enumerate(tasks)])


def train(steps: int, model_name: str, url: str | None, out_dir: str, generations: int = 2,
          max_completion_length: int = 5120, seed: int = 0, warm_steps: int = 0,
          temperature: float = 0.7, tasks: int = 4, warm_moves: int | None = None,
          max_tool_calls: int = 6) -> dict:
    """Warm-start the model on the expert's episodes of ``tasks`` training tasks (``warm_moves``
    moves each; default all), then run GRPOTrainer for ``steps`` steps on those tasks. The
    completion budget covers a whole episode: the tools' answers (pages of the shop) count in
    it. Returns the logged metrics."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from gagpo.agents.models import load_model
    from gagpo.integrations.trl import WebShopTools

    torch.manual_seed(seed)
    model, tokenizer = load_model(model_name, device="cpu")
    model.train()
    tool_chat_template(tokenizer)
    data = dataset(tasks)
    warm_loss = (warm_start(model, tokenizer, list(data), warm_steps, moves=warm_moves)
                 if warm_steps else None)
    config = GRPOConfig(
        output_dir=out_dir, max_steps=steps, learning_rate=1e-4,
        per_device_train_batch_size=generations, num_generations=generations,
        max_completion_length=max_completion_length, max_tool_calling_iterations=max_tool_calls,
        temperature=temperature, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, dataloader_num_workers=0, seed=seed,
    )
    with contextlib.ExitStack() as stack:
        if url is None:
            from gagpo.integrations.openenv import running_server

            url = stack.enter_context(running_server("WebShop-v0", idle_timeout=600)).url
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, args=config,
            train_dataset=data,
            environment_factory=partial(WebShopTools, url=url),
        )
        trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    return {"steps": trainer.state.global_step, "warm_start_loss": warm_loss,
            "log": logged}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="GRPO steps (default 5)")
    p.add_argument("--model", default="tiny", help="tiny | smollm2-135m | a Hugging Face id")
    p.add_argument("--url", default=None,
                   help="a gagpo serve env server of WebShop-v0 (default: start one here)")
    p.add_argument("--generations", type=int, default=2, help="rollouts per prompt")
    p.add_argument("--tasks", type=int, default=4, help="training tasks (default 4)")
    p.add_argument("--warm-steps", type=int, default=60,
                   help="supervised steps on the expert's episodes first (0: none)")
    p.add_argument("--warm-moves", type=int, default=None,
                   help="expert moves per task in the warm start (default: all)")
    p.add_argument("--out-dir", default=None, help="TRL's output folder (default: temporary)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(args.steps, args.model, args.url, args.out_dir or tmp, args.generations,
                       warm_steps=args.warm_steps, tasks=args.tasks,
                       warm_moves=args.warm_moves)
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
