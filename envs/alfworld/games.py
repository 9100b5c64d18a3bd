"""Game sources behind one loader: a folder in ALFWorld's official layout, or our generated set.

Both are read the same way, by the rules of ALFWorld's own ``AlfredTWEnv.collect_game_files``: a
game is a ``trial_*`` folder holding ``traj_data.json`` (its ``task_type`` must be one of the six)
and ``game.tw-pddl`` marked ``"solvable": true``; paths containing "movable" or "Sliced" are
skipped. Games of a split are listed sorted by path, so index ``i`` names the same game everywhere.

- official: ``$ALFWORLD_DATA`` (what ``alfworld-download`` fills) or any folder passed as
  ``data_dir``; either the folder holding ``json_2.1.1`` or ``json_2.1.1`` itself.
- generated (the default): made by :mod:`gagpo.envs.alfworld.generator`, shipped with the
  package (:mod:`gagpo.envs.alfworld.default_set`), unpacked on first use and cached under
  ``$GAGPO_CACHE/alfworld`` (default ``~/.cache/gagpo/alfworld``). Generated games say so in
  their traj_data.json, and every result on them is labelled "ALFWorld-style".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gagpo.envs.alfworld import default_set
from gagpo.envs.alfworld.generator import (  # DEFAULT_*: the default set's, defined there
    DEFAULT_SEED,
    DEFAULT_SIZES,
    GENERATOR_TAG,
    LAYOUT_DIR,
    SHORT_NAMES,
    SPLITS,
    TASK_TYPES,
)

LABEL_GENERATED = "ALFWorld-style (generated games)"
LABEL_OFFICIAL = "ALFWorld (official games)"


@dataclass(frozen=True)
class Game:
    """One playable game of a source."""

    task_id: str  # "<split>/<task folder>/<trial folder>", the game's path-style name
    split: str
    task_type: str
    path: Path  # its game.tw-pddl

    @property
    def short_type(self) -> str:
        return SHORT_NAMES[self.task_type]

    def traj_data(self) -> dict:
        return json.loads((self.path.parent / "traj_data.json").read_text())

    def walkthrough(self) -> list[str]:
        """The stored plan (official games: the planner's; generated: checked at generation)."""
        return list(json.loads(self.path.read_text()).get("walkthrough") or [])


def resolve_root(data_dir: str | os.PathLike[str]) -> Path:
    """The ``json_2.1.1`` folder of an official-layout data folder."""
    root = Path(os.path.expandvars(os.path.expanduser(str(data_dir))))
    if (root / LAYOUT_DIR).is_dir():
        return root / LAYOUT_DIR
    if root.is_dir():
        return root
    raise FileNotFoundError(f"no ALFWorld data at {root} (expected {root / LAYOUT_DIR})")


class GameSource:
    """The games of a folder in the official layout, split by split."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = resolve_root(data_dir)
        self._games: dict[str, list[Game]] = {}

    def splits(self) -> list[str]:
        """The split folders present (official data: train, valid_seen, valid_unseen)."""
        names = [p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        known = [s for s in SPLITS if s in names]
        return known + sorted(n for n in names if n not in SPLITS)

    def games(self, split: str) -> list[Game]:
        """The split's playable games, sorted by path."""
        if split not in self._games:
            folder = self.root / split
            if not folder.is_dir():
                raise ValueError(f"split {split!r} not found under {self.root} ({self.splits()})")
            self._games[split] = _collect(folder, split)
        return self._games[split]

    def find(self, task_id: str) -> Game:
        split = task_id.split("/", 1)[0]
        for game in self.games(split) if split in self.splits() else []:
            if game.task_id == task_id:
                return game
        raise KeyError(f"no game {task_id!r} under {self.root}")

    @cached_property
    def generated(self) -> bool:
        """Whether these are games of our generator (then results are 'ALFWorld-style')."""
        for split in self.splits():
            for game in self.games(split)[:1]:
                return game.traj_data().get("generator", {}).get("name") == GENERATOR_TAG
        return False

    @property
    def label(self) -> str:
        return LABEL_GENERATED if self.generated else LABEL_OFFICIAL


def _collect(folder: Path, split: str) -> list[Game]:
    games = []
    for traj in folder.rglob("traj_data.json"):
        trial = traj.parent
        game_file = trial / "game.tw-pddl"
        rel = trial.relative_to(folder.parent).as_posix()
        if "movable" in rel or "Sliced" in rel or not game_file.exists():
            continue
        task_type = json.loads(traj.read_text()).get("task_type")
        if task_type not in TASK_TYPES:
            continue
        try:
            solvable = json.loads(game_file.read_text()).get("solvable")
        except json.JSONDecodeError:
            continue
        if solvable:
            games.append(Game(rel, split, task_type, game_file))
    return sorted(games, key=lambda g: g.task_id)


def default_generated_dir(seed: int = DEFAULT_SEED, sizes: dict[str, int] | None = None) -> Path:
    """The default generated set, written on first use (atomically, see
    :func:`gagpo.common.cache.build_once`: concurrent first uses never see half a set).

    The games the package ships (:mod:`gagpo.envs.alfworld.default_set`: seed 0, up to 48 /
    24 / 24 games) are unpacked, which needs neither the planner nor the alfworld wheel; only
    games beyond them are generated (that needs ``gagpo[alfworld]``).
    """
    from gagpo.common.cache import build_once, cache_dir

    sizes = dict(sizes or DEFAULT_SIZES)
    tag = "-".join(f"{s}{n}" for s, n in sizes.items())
    target = cache_dir() / "alfworld" / f"generated-v1-seed{seed}-{tag}"

    def generate(out: Path) -> None:
        shipped = dict.fromkeys(sizes, 0)
        if seed == default_set.shipped_seed():
            shipped = default_set.unpack(out, sizes)
        if all(shipped[split] == n for split, n in sizes.items()):
            return
        from gagpo.envs.alfworld.generator import generate_games

        print(f"[alfworld] generating ALFWorld-style games in {target} (once)")
        for split, n in sizes.items():
            if n > shipped[split]:
                generate_games(out, split, n - shipped[split], seed=seed, progress=True,
                               start=shipped[split])

    return build_once(target, generate)


def open_source(data_dir: str | os.PathLike[str] | None = None) -> GameSource:
    """``data_dir``, else ``$ALFWORLD_DATA`` if it holds official data, else the generated set."""
    if data_dir is not None:
        return GameSource(data_dir)
    env_dir = os.environ.get("ALFWORLD_DATA")
    if env_dir and (Path(env_dir) / LAYOUT_DIR).is_dir():
        return GameSource(env_dir)
    return GameSource(default_generated_dir())
