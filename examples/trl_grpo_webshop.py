"""Train a small model with TRL's GRPOTrainer on WebShop-v0, served over OpenEnv.

The shop runs as a ``gagpo serve env`` server (started here in a thread, or yours with
``--url``); each rollout plays one session through :class:`gagpo.trl_envs.WebShopTools`, whose
``search(query)`` and ``click(element)`` are the model's tools, and is rewarded with the
episode's score. On a CPU with the built-in 134k-parameter ``tiny`` model, a step takes
seconds::

    pip install 'gagpo[agents,openenv,trl]'
    python examples/trl_grpo_webshop.py --steps 5
    gagpo serve env --env WebShop-v0 --port 8000 &      # or serve it yourself
    python examples/trl_grpo_webshop.py --url http://127.0.0.1:8000 --model smollm2-135m

The tiny model is untrained: it rarely calls a tool, so its rewards are mostly 0; the point is
the whole loop (prompt, tool calls against the server, score as reward, update). A model that
knows tool calling (``--model`` with a Hugging Face id) starts from better.
"""

from __future__ import annotations

import argparse
import contextlib
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


def warm_start(model, tokenizer, rows, steps: int, lr: float = 3e-3) -> float:
    """Teach the model the tool-call format on the expert's first move of a few tasks (a
    short supervised run on whole conversations, as TRL renders them): an untrained model
    never calls a tool, and GRPO has nothing to compare. Returns the last loss."""
    import torch

    from gagpo.trl_envs import WebShopTools

    env = WebShopTools(request_infos=["expert_action"])
    texts = []
    for row in rows:
        first = env.reset(task=row["task"], split=row["split"], seed=row["seed"])
        query = env._info["expert_action"][len("search["):-1]
        messages = [*row["prompt"][:-1],
                    {"role": "user", "content": row["prompt"][-1]["content"] + first},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"type": "function",
                         "function": {"name": "search", "arguments": {"query": query}}}]}]
        texts.append(tokenizer.apply_chat_template(messages, tools=[env.search, env.click],
                                                   tokenize=False))
    env._shutdown()
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return float(loss)


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
          max_completion_length: int = 192, seed: int = 0, warm_steps: int = 0,
          temperature: float = 0.7) -> dict:
    """Run GRPOTrainer for ``steps`` steps; returns the last logged metrics."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from gagpo.agents.models import load_model
    from gagpo.trl_envs import WebShopTools

    torch.manual_seed(seed)
    model, tokenizer = load_model(model_name, device="cpu")
    model.train()
    tool_chat_template(tokenizer)
    data = dataset(max(8, steps))
    warm_loss = warm_start(model, tokenizer, list(data)[:2], warm_steps) if warm_steps else None
    config = GRPOConfig(
        output_dir=out_dir, max_steps=steps, learning_rate=1e-4,
        per_device_train_batch_size=generations, num_generations=generations,
        max_completion_length=max_completion_length, max_tool_calling_iterations=4,
        temperature=temperature, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, dataloader_num_workers=0, seed=seed,
    )
    with contextlib.ExitStack() as stack:
        if url is None:
            from gagpo.openenv_server import running_server

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
    p.add_argument("--warm-steps", type=int, default=60,
                   help="supervised steps teaching the tool-call format first (0: none)")
    p.add_argument("--out-dir", default=None, help="TRL's output folder (default: temporary)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(args.steps, args.model, args.url, args.out_dir or tmp, args.generations,
                       warm_steps=args.warm_steps)
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
