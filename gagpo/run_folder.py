"""What a training run leaves in its folder, and how a resume reads it back.

``config.json`` (the first settings) and ``config_changes.jsonl`` (what each resume changed),
``checkpoint.pt`` (model, optimiser and RNG state, written atomically), ``steps/iter_*.npz``
(each iteration's step table), ``metrics.jsonl`` (plus TensorBoard / W&B when asked) and
``evals.json``. Every file that must survive a kill is replaced through :func:`atomic_write`.

The readers at the end (:func:`step_tables`, :func:`read_step_table`, :func:`read_metrics`)
are what ``gagpo view`` knows of a run folder; this module imports torch and the trainer's
settings only inside the functions that need them, so that the viewer never loads them.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gagpo.agents.rollout import StepTable
    from gagpo.train_config import TrainConfig


def earlier_run(out: Path) -> list[str]:
    """What an earlier run's iterations left in ``out`` (empty when nothing; a ``config.json``
    alone is a run that stopped before its first iteration, with nothing to lose)."""
    found = [p.name for p in (out / "checkpoint.pt", out / "metrics.jsonl") if p.exists()]
    steps = out / "steps"
    if steps.is_dir() and any(steps.iterdir()):
        found.append("step tables")
    return found


def prepare_run_folder(out: Path, cfg: TrainConfig, state: dict | None) -> None:
    """Make ``out`` hold exactly the run up to where it goes on from (rank 0).

    Resuming (``state``): what the interrupted run logged past the checkpoint is cut
    (:func:`cut_run`; TensorBoard by the logger), ``evals.json`` is the checkpoint's, and
    ``config.json`` keeps the run's first settings (changes go to ``config_changes.jsonl``).
    Starting (``--overwrite``, or ``--resume`` finding no checkpoint): an earlier run's files
    there are replaced, and said so.
    """
    (out / "steps").mkdir(parents=True, exist_ok=True)
    if state is not None:
        cut_run(out, state["iteration"])
        if state["evals"]:
            write_json(out / "evals.json", state["evals"], indent=1)
        else:
            (out / "evals.json").unlink(missing_ok=True)
        if not (out / "config.json").exists():
            write_json(out / "config.json", state["config"])
        return
    if cfg.resume:
        print(f"note: {out} holds no checkpoint: --resume starts from iteration 0")
    earlier = earlier_run(out)
    if earlier:
        print(f"note: {out} holds an earlier run ({', '.join(earlier)}); the new run replaces it")
        cut_run(out, 0)
        for name in ("checkpoint.pt", "evals.json", "config_changes.jsonl"):
            (out / name).unlink(missing_ok=True)
    write_json(out / "config.json", cfg.to_dict())


def record_config_changes(out: Path, iteration: int, diffs: dict[str, tuple[Any, Any]]) -> None:
    """Append one line to ``config_changes.jsonl``: the iteration a resume started from and
    every setting it changed (``config.json`` keeps the run's first settings; the checkpoint
    holds the current ones)."""
    from gagpo.train_config import RESUME_MAY_CHANGE

    changes = {name: {"checkpoint": old, "new": new} for name, (old, new) in diffs.items()
               if name not in ("resume", "resume_override", "overwrite")}
    if not changes:
        return
    line = {"resumed_from_iteration": iteration,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "changes": changes,
            "overridden": sorted(n for n in changes if n not in RESUME_MAY_CHANGE)}
    with open(out / "config_changes.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line, default=repr) + "\n")


def _iteration_of(step_table: Path) -> int | None:
    """``iter_00012[_rank1].npz`` -> 12."""
    head = step_table.name.split(".")[0].split("_rank")[0]
    return int(head[5:]) if head.startswith("iter_") and head[5:].isdigit() else None


def cut_run(out: Path, iteration: int) -> int:
    """Forget what a run logged past ``iteration`` (that of the checkpoint it resumes from; 0
    to start over): ``metrics.jsonl`` keeps its lines up to it (rewritten atomically; a line
    torn by a kill is dropped too; deleted when none is left, so that a run stopped before
    its first iteration leaves no empty file behind), step tables past it and temporary files
    are deleted.
    TensorBoard's points are cut by :class:`MetricLogger` (``purge_step``). Returns the number
    of metric lines dropped."""
    dropped = 0
    metrics = out / "metrics.jsonl"
    if metrics.exists():
        kept = []
        for line in metrics.read_text(encoding="utf-8").splitlines():
            try:
                keep = int(json.loads(line)["iteration"]) <= iteration
            except (ValueError, KeyError, TypeError):
                keep = False
            if keep:
                kept.append(line + "\n")
            else:
                dropped += 1
        if not kept:
            metrics.unlink()
        elif dropped:
            atomic_write(metrics, lambda f: f.write("".join(kept).encode("utf-8")))
    for path in [*out.glob("steps/*"), *out.glob("*.tmp")]:
        it = _iteration_of(path)
        if path.name.endswith(".tmp") or (it is not None and it > iteration):
            path.unlink()
    return dropped


def rng_state(policy: Any) -> dict[str, Any]:
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state(), "policy": policy.generator.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], policy: Any) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    policy.generator.set_state(state["policy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def fsync_dir(folder: Path) -> None:
    """Make the folder's entries (a rename, a new file) durable (POSIX; elsewhere a no-op)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Replace ``path`` whole or not at all, durably: the one write-then-rename of a run.

    ``write`` fills ``<name>.tmp`` beside it; that file is flushed and fsynced *before* the
    rename, so that after a power loss the rename can never point at data the disk does not
    hold yet, then ``os.replace`` swaps it in and the folder is fsynced so that the rename
    itself is on disk. A crash, kill or power loss at any point leaves either the previous
    ``path`` or the new one, whole; an exception removes the temporary file.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json(path: Path, value: Any, indent: int | None = 2) -> None:
    atomic_write(path, lambda f: f.write(json.dumps(value, indent=indent).encode()))


def save_checkpoint(path: Path, **payload: Any) -> None:
    """``torch.save`` through :func:`atomic_write`: a crash mid-write, or a power loss, leaves
    the previous checkpoint whole and loadable."""
    import torch

    atomic_write(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: Path, **load_args: Any) -> dict[str, Any]:
    """What :func:`save_checkpoint` wrote, its tensors on the CPU whatever device wrote them
    (a GPU run's checkpoint resumes or exports on any machine, and no rank's copy lands on the
    GPU that saved it; the model's load moves them to its own device). ``load_args`` go to
    ``torch.load``. A damaged file, or one that is not a gagpo training checkpoint, is a
    ``ValueError`` that names it."""
    import pickle

    import torch

    try:
        state = torch.load(path, weights_only=False, **{"map_location": "cpu", **load_args})
    except (RuntimeError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"{path} is not a checkpoint torch can read ({e})") from e
    if not isinstance(state, dict) or not {"model", "config", "iteration"} <= state.keys():
        raise ValueError(f"{path} is not a gagpo training checkpoint (it lacks the model, "
                         "config or iteration)")
    return state


STEP_TABLE_VERSION = 2
"""Version 2 (``version`` in the table) keeps each step's ``reply`` and ``task_type``, and the
``observation`` as ``save_observations`` says; version 1 (no ``version``) had neither reply nor
task type."""


def save_step_table(path: Path, table: StepTable, columns: dict[str, np.ndarray],
                    keep_observations: bool) -> None:
    """One iteration's steps (``table``, plus the trainer's per-row ``columns`` as float32) as
    a compressed ``.npz`` of columns (``np.load`` reads it; :func:`read_step_table` too): the
    reply texts always, the observation texts when ``keep_observations``."""
    data = {
        "version": np.int16(STEP_TABLE_VERSION),
        "group": table.column("group", np.int32),
        "trajectory": table.column("trajectory", np.int32),
        "t": table.column("t", np.int16),
        **{name: table.column(name) for name in ("task_id", "task_type", "state_key", "reply",
                                                  "action", "well_formed", "action_valid",
                                                  "done", "won")},
        "score": table.column("score", np.float32),
        "n_tokens": np.array([len(ids) for ids in table.column("token_ids")], np.int32),
        "logprob_sum": np.array([sum(lp) for lp in table.column("logprobs")], np.float32),
        **{k: np.asarray(v, np.float32) for k, v in columns.items()},
    }
    if keep_observations:
        data["observation"] = table.column("observation")
    atomic_write(path, lambda f: np.savez_compressed(f, **data))


class MetricLogger:
    """JSONL always; TensorBoard and W&B when asked (rank 0 only).

    ``start``: the iteration the run goes on from (that of the checkpoint it resumed, else 0).
    When ``tensorboard/`` already holds events, the writer opens with ``purge_step=start + 1``:
    its first record tells TensorBoard's readers to drop every earlier point at that step or
    later, so iterations logged after the checkpoint by the interrupted run do not show twice.
    (W&B keeps its own history: it ignores steps it has already seen.)
    """

    def __init__(self, cfg: TrainConfig, out: Path, enabled: bool, start: int = 0) -> None:
        self.enabled, self.path = enabled, out / "metrics.jsonl"
        self.tb = self.wandb = None
        if not enabled:
            return
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                folder = out / "tensorboard"
                earlier = any(folder.glob("events.out.tfevents.*"))
                self.tb = SummaryWriter(str(folder), purge_step=start + 1 if earlier else None)
            except ImportError:
                print("tensorboard is not installed: metrics go to metrics.jsonl only")
        if cfg.wandb:
            import wandb  # optional: pip install wandb

            self.wandb = wandb.init(project=cfg.wandb_project, config=cfg.to_dict(),
                                    dir=str(out), resume="allow", id=out.name)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"iteration": step, **metrics}) + "\n")
        flat = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        if self.tb is not None:
            for k, v in flat.items():
                self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(flat, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def eval_metrics(summary: dict[str, Any], prefix: str = "eval/") -> dict[str, float]:
    a = summary["all"]
    return {f"{prefix}success": a["success"], f"{prefix}success_lo": a["success_ci95"][0],
            f"{prefix}success_hi": a["success_ci95"][1], f"{prefix}score": a["score"],
            f"{prefix}length": a["mean_length"], f"{prefix}episodes": a["episodes"]}


# ---------------------------------------------------------------------------------------------
# Reading a run folder back (``gagpo view``): never raises on a folder that is being written.


class UnreadableTable(Exception):
    """A step table that cannot be read (being replaced, torn, or not a step table)."""


def step_tables(out: Path) -> dict[int, list[Path]]:
    """``{iteration: [its step tables, one per rank]}`` in ``out/steps`` (temporary files of a
    write under way left out), iterations in order."""
    found: dict[int, list[Path]] = {}
    folder = out / "steps"
    if not folder.is_dir():
        return {}
    for path in sorted(folder.glob("iter_*.npz")):
        it = _iteration_of(path)
        if it is not None:
            found.setdefault(it, []).append(path)
    return dict(sorted(found.items()))


def read_step_table(paths: list[Path], columns: list[str] | None = None) -> dict[str, Any]:
    """The named ``columns`` (all when None) of one iteration's tables, ranks concatenated
    (each rank's ``group`` and ``trajectory`` offset so that they stay distinct). Only the
    columns asked for are decompressed. ``version`` is 1 for tables written before replies were
    kept; a column a table lacks is left out.

    Raises:
        UnreadableTable: a file is missing, torn or not an ``.npz`` of columns.
    """
    parts: list[dict[str, np.ndarray]] = []
    version = STEP_TABLE_VERSION
    for path in paths:
        try:
            with np.load(path, allow_pickle=False) as z:
                names = [n for n in z.files if n != "version"]
                if "group" not in names:
                    raise UnreadableTable(f"{path.name} is not a step table (no group column)")
                version = min(version, int(z["version"]) if "version" in z.files else 1)
                want = names if columns is None else [c for c in columns if c in names]
                parts.append({n: z[n] for n in {*want, "group", "trajectory"}})
        except UnreadableTable:
            raise
        except Exception as e:  # OSError, zipfile.BadZipFile, zlib.error, ValueError: torn
            raise UnreadableTable(f"{path.name}: {type(e).__name__}: {e}") from e
    if not parts:
        raise UnreadableTable("no step table")
    out: dict[str, Any] = {"version": version}
    g_off = t_off = 0
    for part in parts:
        part["group"] = part["group"] + g_off
        part["trajectory"] = part["trajectory"] + t_off
        if len(part["group"]):
            g_off, t_off = int(part["group"].max()) + 1, int(part["trajectory"].max()) + 1
    keys = set.intersection(*(set(p) for p in parts))
    for k in keys:
        if columns is None or k in columns or k in ("group", "trajectory"):
            out[k] = np.concatenate([p[k] for p in parts]) if len(parts) > 1 else parts[0][k]
    return out


def read_metrics(out: Path) -> list[dict[str, Any]]:
    """``metrics.jsonl``'s lines as dicts, in order; a line torn by a kill (or being written)
    is skipped."""
    path = out / "metrics.jsonl"
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("iteration"), int):
            rows.append(row)
    return rows


def read_json(path: Path) -> Any:
    """A JSON file's value, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
