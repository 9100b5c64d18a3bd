"""The task dataset verl reads: one parquet row per task of a split.

``gagpo verl-data --env WebShop-v0 --out data/webshop`` writes ``train.parquet`` (the env's
training split) and ``test.parquet`` (its held-out split), each row a task verl draws and
plays ``rollout.n`` times with the ``gagpo_env`` agent loop::

    data_source   the env id (the loop makes this environment)
    agent_name    "gagpo_env"
    prompt        the task's instruction as one user message (verl's dataset requires a
                  prompt; the loop builds the real one each step)
    extra_info    {"index": row, "task": the task, "split": its split, "seed": the reset seed}

Tasks are checked against the environment when written: a row always names a task its split
has, so a bad row fails here, not on a GPU hours later.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gagpo.envs import probe

AGENT_NAME = "gagpo_env"

DEFAULT_SPLITS: dict[str, tuple[str, str]] = {
    "WebShop-v0": ("train", "test"),
    "ALFWorld-v0": ("train", "valid_unseen"),
}
"""Each bundled env's (training, held-out) splits."""


def task_rows(env_id: str, split: str, *, limit: int | None = None, seed: int = 0,
              env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The dataset rows of ``split``'s tasks (the first ``limit``; all when None), each reset
    with ``seed`` so a task's ``rollout.n`` copies start in one state.

    Raises:
        ValueError: no such env or split, or an empty split.
    """
    with probe(env_id, **(env_kwargs or {})) as env:
        if split not in env.splits:
            raise ValueError(f"{env_id} has no split {split!r}; its splits: {list(env.splits)}")
        tasks = list(env.split_tasks(split))[:limit]
        if not tasks:
            raise ValueError(f"{env_id}'s split {split!r} has no tasks (limit {limit})")
        rows = []
        for index, task in enumerate(tasks):
            _, info = env.reset(seed=seed, options={"task": task, "split": split})
            rows.append({
                "data_source": env_id,
                "agent_name": AGENT_NAME,
                "prompt": [{"role": "user", "content": str(info.get("instruction", ""))}],
                "extra_info": {"index": index, "task": task, "split": split, "seed": seed},
            })
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    """``rows`` as a parquet file (pyarrow, which the ``verl`` extra brings)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError("writing verl's dataset needs pyarrow: pip install 'gagpo[verl]'") \
            from e
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_dataset(env_id: str, out: Path, *, train_split: str | None = None,
                  test_split: str | None = None, train_size: int | None = None,
                  test_size: int | None = None, seed: int = 0,
                  env_kwargs: dict[str, Any] | None = None) -> dict[str, Path]:
    """``train.parquet`` and ``test.parquet`` of ``env_id`` in ``out`` (splits default to
    :data:`DEFAULT_SPLITS`, else the env's first and last); returns their paths."""
    with probe(env_id, **(env_kwargs or {})) as env:
        splits = list(env.splits)
    default_train, default_test = DEFAULT_SPLITS.get(env_id, (splits[0], splits[-1]))
    written = {}
    for name, split, size in (("train", train_split or default_train, train_size),
                              ("test", test_split or default_test, test_size)):
        rows = task_rows(env_id, split, limit=size, seed=seed, env_kwargs=env_kwargs)
        written[name] = write_parquet(rows, Path(out) / f"{name}.parquet")
    return written


def main(argv: list[str] | None = None) -> int:
    from gagpo.common.flags import json_object

    parser = argparse.ArgumentParser(
        prog="gagpo verl-data",
        description="Write the task dataset verl reads (train.parquet, test.parquet).")
    parser.add_argument("--env", default="WebShop-v0", help="a registered env id")
    parser.add_argument("--out", required=True, type=Path, help="folder of the parquet files")
    parser.add_argument("--train-split", help="training split (default: the env's own)")
    parser.add_argument("--test-split", help="held-out split (default: the env's own)")
    parser.add_argument("--train-size", type=int, help="first N training tasks (default: all)")
    parser.add_argument("--test-size", type=int, help="first N held-out tasks (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the reset seed of every row")
    parser.add_argument("--env-kwargs", type=json_object, default={},
                        help="gymnasium.make arguments (JSON object)")
    args = parser.parse_args(argv)
    try:
        written = write_dataset(args.env, args.out, train_split=args.train_split,
                                test_split=args.test_split, train_size=args.train_size,
                                test_size=args.test_size, seed=args.seed,
                                env_kwargs=args.env_kwargs)
    except (ValueError, ImportError) as e:
        parser.exit(2, f"gagpo verl-data: error: {e}\n")
    for name, path in written.items():
        print(f"{path}: {args.env} {name} tasks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
