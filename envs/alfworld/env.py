"""ALFWorld-v0: ALFWorld's household text games as a Gymnasium env, on the reference engine
(TextWorld's PDDL backend) or on our native engine (:mod:`gagpo.envs.alfworld.native`), which
gives the same text, commands, ``won`` and facts.

Observations are the engine's text, unchanged (the reset text included: "-= Welcome to
TextWorld, ALFRED! =- ... Your task is to: ..."). Actions are its commands ("go to cabinet 1",
"take apple 2 from countertop 1", "heat apple 2 with microwave 1", ...); reward and ``won`` are
its goal check (1 when the task is done, which ends the episode); ``MAX_STEPS`` steps at most.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from gagpo.envs.alfworld import engine as _engine
from gagpo.envs.alfworld import speedups as _speedups
from gagpo.envs.alfworld.expert import EXPERT_PREDICATES, Expert, Targets
from gagpo.envs.alfworld.expert import World as ExpertWorld
from gagpo.envs.alfworld.games import Game, GameSource, open_source
from gagpo.envs.alfworld.generator import SHORT_NAMES, TASK_TYPES
from gagpo.envs.alfworld.limits import MAX_STEPS
from gagpo.envs.alfworld.state import DYNAMIC_PREDICATES, state_key, world_state_key
from gagpo.envs.base import TextEnv, split_name, step_limit, task_index

_INSTRUCTION_PREFIX = "Your task is to: "
ENGINES = ("reference", "native")
DEFAULT_ENGINE = "native"
_ACCEPTS = ("a game index (int) into the split's games sorted by path, or a task id "
            "'<split>/<task folder>/<trial folder>' (info['task_id'])")


class AlfworldEnv(TextEnv):
    """ALFWorld (Shridhar et al. 2021) text games.

    Args:
        data_dir: a folder in ALFWorld's official layout (holding ``json_2.1.1``). None uses
            ``$ALFWORLD_DATA`` when it holds official data, else gagpo's generated
            ALFWorld-style set (shipped with the package, unpacked on first use and cached; see
            :mod:`gagpo.envs.alfworld.games`).
        split: the split random resets draw from: ``train``, ``valid_seen`` or ``valid_unseen``.
        task_types: keep only these task types (full names or pick/look/clean/heat/cool/pick2).
        speedups: memoise the reference engine's slow parts (:mod:`gagpo.envs.alfworld.speedups`);
            the text is identical either way.
        engine: ``"reference"`` (TextWorld's PDDL backend with ALFWorld's wrappers) or
            ``"native"`` (:mod:`gagpo.envs.alfworld.native`: the same text, commands, ``won`` and
            facts, without textworld, fast-downward or alfworld at play time). A game the native
            engine cannot read plays on the reference engine, with a warning at its reset naming the
            file and the part it could not read.
        max_steps: truncate episodes after this many steps (default
            :data:`gagpo.envs.alfworld.limits.MAX_STEPS`, ALFWorld's).

    ``reset(options={"task": i})`` plays game ``i`` of the split (sorted by path), or a task id
    such as ``"valid_unseen/pick_and_place_simple-Pencil-None-Dresser-330/trial_..."``;
    ``options={"split": ...}`` draws from another split. After the win or the truncation, steps
    are no-ops that say to call ``reset()`` (the engine would pay the win again). Infos hold
    the contract's keys (see :mod:`gagpo.envs.base`) plus ``task_type``, ``task_type_short``,
    ``split``, ``dataset`` (the label results must carry: official games or ALFWorld-style
    generated ones), ``gamefile`` and ``feedback`` (the engine's answer, also after a rejected
    command).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        split: str = "train",
        task_types: list[str] | tuple[str, ...] | None = None,
        speedups: bool = True,
        max_steps: int = MAX_STEPS,
        request_infos: tuple[str, ...] | list[str] = (),
        render_mode: str | None = None,
        engine: str = DEFAULT_ENGINE,
    ) -> None:
        super().__init__(render_mode=render_mode)
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
        self.engine = engine
        self.request_infos = tuple(request_infos)
        unknown = set(self.request_infos) - {"expert_action"}
        if unknown:
            raise ValueError(f"unknown request_infos {sorted(unknown)}; known: ['expert_action']")
        self.max_steps = step_limit(max_steps)
        if engine == "reference":
            _engine.require()
        self.source: GameSource = open_source(data_dir)
        self.split = split_name(split, self.splits)
        self.task_types = _task_types(task_types)
        self.use_speedups = speedups
        if speedups and engine == "reference":
            _speedups.enable()
        self.games(split)  # validates the split and lists it once
        self._tw: Any = None  # the reference engine, started on first use
        self._native: Any = None  # the native engine, made on first use
        self._active: Any = None  # the engine playing the current episode
        self._unreadable: dict[str, str] = {}  # game file -> why the native engine refused it
        self._loaded: str | None = None
        self._game: Game | None = None
        self._infos: dict[str, Any] = {}
        self._instruction = ""
        self._expert: Expert | None = None

    # -- games ---------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """How results on this env must be labelled (official games vs ALFWorld-style)."""
        return self.source.label

    report_label = label

    def split_tasks(self, split: str | None = None) -> range:
        """Task indices of ``split`` (default: the env's): its games sorted by path."""
        return range(len(self.games(split)))

    def games(self, split: str | None = None) -> list[Game]:
        """The playable games of a split (of the kept task types), sorted by path."""
        games = self.source.games(self.split if split is None else split_name(split, self.splits))
        return [g for g in games if g.task_type in self.task_types]

    @property
    def splits(self) -> list[str]:
        """The splits of the game source (official data: train, valid_seen, valid_unseen)."""
        return self.source.splits()

    def _pick(self, task: Any, split: str) -> Game:
        if isinstance(task, str):
            try:
                return self.source.find(task)
            except KeyError:
                raise ValueError(
                    f"options['task'] must be {_ACCEPTS}; no game has the id {task!r:.120}"
                ) from None
        games = self.games(split)
        if not games:
            raise ValueError(f"split {split!r} has no games of types {self.task_types}")
        if task is None:
            return games[int(self.np_random.integers(len(games)))]
        return games[task_index(task, len(games), f"{_ACCEPTS} (split {split!r})")]

    # -- gym API -------------------------------------------------------------------------------

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        game = self._pick(task, split)
        path = str(game.path)
        self._active = self._native_for(path) if self.engine == "native" else None
        if self._active is None:
            if self._tw is None:
                self._tw = _engine.start(path)
            elif self._loaded != path:
                self._tw.load(path)
            self._loaded = path
            self._active = self._tw
        obs, infos = self._active.reset()
        self._game, self._infos = game, infos
        self._instruction = _instruction(obs)
        self._expert = None
        return obs, self._info(obs, action_valid=True)

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        # The engine matches the stripped command against what it can do now; anything else
        # leaves the world unchanged and answers "Nothing happens.".
        valid = action.strip() in self._valid_commands()
        obs, score, _, infos = self._active.step(action)
        self._infos = infos
        return obs, float(score), bool(infos["won"]), self._info(obs, action_valid=valid)

    def _info(self, obs: str, action_valid: bool) -> dict[str, Any]:
        game = self._game
        assert game is not None
        infos = self._infos
        won = bool(infos["won"])
        extra = {}
        if "expert_action" in self.request_infos:
            extra["expert_action"] = None if won else self.expert_action()
        return self.make_info(
            task_id=game.task_id,
            instruction=self._instruction,
            admissible_actions=[c for c in infos["admissible_commands"] if c != "help"],
            state_key=self._state_key(infos),
            won=won,
            score=1.0 if won else 0.0,
            action_valid=action_valid,
            task_type=game.task_type,
            task_type_short=SHORT_NAMES[game.task_type],
            split=game.split,
            dataset=self.label,
            gamefile=str(game.path),
            feedback=obs,
            **extra,
        )

    # -- engines -------------------------------------------------------------------------------

    def _native_for(self, path: str) -> Any:
        """The native engine loaded with ``path``, or None (with a warning) when it cannot read
        the file: that game's episodes then play on the reference engine."""
        from gagpo.envs.alfworld.native import GameFileError, NativeEnv

        if path in self._unreadable:
            return None
        if self._native is None:
            self._native = NativeEnv()
        try:
            self._native.load(path)
        except GameFileError as e:
            self._unreadable[path] = str(e)
            warnings.warn(
                f"ALFWorld-v0: the native engine cannot read this game ({e}); its episodes "
                "play on the reference engine",
                RuntimeWarning,
                stacklevel=4,
            )
            _engine.require()
            return None
        return self._native

    @property
    def engine_in_use(self) -> str | None:
        """The engine playing the current episode ("native" or "reference"), None before
        the first reset."""
        if self._active is None:
            return None
        return "reference" if self._active is self._tw else "native"

    def _valid_commands(self) -> list[str]:
        if self._active is self._tw:
            return self._tw.state["_valid_commands"]
        return self._active.valid_commands

    def _state_key(self, infos: dict[str, Any]) -> str:
        if self._active is self._tw:
            return state_key(infos["facts"])
        # The same key from the native fact view, without building every fact.
        return world_state_key(self._active.world_facts(DYNAMIC_PREDICATES))

    # -- for experts, tests and demonstrations -------------------------------------------------

    @property
    def facts(self) -> list[Any]:
        """The engine's current facts (TextWorld Propositions with demangled names)."""
        return list(self._infos.get("facts", []))

    @property
    def game(self) -> Game | None:
        return self._game

    def walkthrough(self) -> list[str]:
        """The current game's stored plan, from its initial state."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        return self._game.walkthrough()

    def expert_action(self) -> str:
        """The expert's next command from the current state, whatever led there."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        if self._expert is None:
            self._expert = Expert(Targets.from_traj_data(self._game.traj_data()))
        facts: Any = self._infos["facts"]
        if self._active is not self._tw:  # the native engine: the facts it reads, as tuples
            facts = ExpertWorld.from_tuples(self._active.world_facts(EXPERT_PREDICATES))
        return self._expert.act(facts, self._infos["admissible_commands"])

    def close(self) -> None:
        self._tw = None
        self._native = None
        self._active = None
        self._loaded = None
        super().close()


def _instruction(reset_text: str) -> str:
    """The "Your task is to: ..." sentence of the reset text."""
    at = reset_text.rfind(_INSTRUCTION_PREFIX)
    return reset_text[at:].strip() if at >= 0 else ""


def _task_types(names: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    if not names:
        return TASK_TYPES
    by_short = {v: k for k, v in SHORT_NAMES.items()}
    out = []
    for name in names:
        full = by_short.get(name, name)
        if full not in TASK_TYPES:
            raise ValueError(f"unknown task type {name!r}; use one of {TASK_TYPES}")
        out.append(full)
    return tuple(out)
