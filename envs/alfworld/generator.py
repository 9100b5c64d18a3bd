"""Offline generator of ALFRED-style games, written in the official ALFWorld layout.

Everything a game is made of comes from what the ``alfworld`` package ships: the PDDL domain and
the text grammar (copied into each game file, as the official ones are), the floor-plan layouts
(which classes a room has, where its openable receptacles stand and from which pose the agent sees
them), ``gen/constants.py`` (what fits in what; what can be cleaned, heated, cooled, toggled) and
``gen/goal_library.py`` (goal PDDL and task-text templates). The placement of objects is random,
so the games are "ALFWorld-style": the same engine, commands, text and task types as the benchmark,
not the simulator-derived scenes of its 3,827 official games.

Each game is checked solvable once, here: fast-downward finds a plan (stored as the game's
``walkthrough``) and the plan is replayed in the engine until ``won``. Play never calls the planner.
Game ``i`` of a split depends only on ``(seed, split, i)``, so sets are reproducible and can grow.

    generate_games("/data/alfworld", "valid_unseen", n=100, seed=0)

writes ``/data/alfworld/json_2.1.1/valid_unseen/<task>-<Obj>-None-<Recep>-<scene>/trial_.../``
with ``traj_data.json``, ``initial_state.pddl`` and ``game.tw-pddl``.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gagpo.envs.alfworld import engine

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SHORT_NAMES = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
SPLITS = ("train", "valid_seen", "valid_unseen")
LAYOUT_DIR = "json_2.1.1"
GENERATOR_TAG = "gagpo ALFWorld-style generator v1"
# The default generated set (shipped with the package: gagpo.envs.alfworld.default_set, read by
# gagpo.envs.alfworld.games): every task type in every split (8 per type in train, 4 in each
# held-out split). Here, with the generator that makes it, so that both import it one way.
DEFAULT_SIZES = {"train": 48, "valid_seen": 24, "valid_unseen": 24}
DEFAULT_SEED = 0

# Appliance each state-changing task needs (the first; the domain cleans only in a SinkBasin),
# and the classes that are never the goal receptacle of that task.
_APPLIANCE = {
    "pick_heat_then_place_in_recep": ("Microwave",),
    "pick_cool_then_place_in_recep": ("Fridge",),
    "pick_clean_then_place_in_recep": ("SinkBasin", "BathtubBasin"),
}
_ACTION_PROPERTY = {
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
    "pick_clean_then_place_in_recep": "Cleanable",
}
# Lamps are not receptacle contents in constants.py; in ALFWorld's scenes they stand on furniture
# (and ToggleObject needs them in a receptacle). Where a lamp may stand, in order of preference:
_LAMP_HOSTS = ("SideTable", "Desk", "Dresser", "Shelf", "CoffeeTable", "TVStand", "DiningTable")
_LAMPS = ("DeskLamp", "FloorLamp")
# Receptacle classes the floor-plan files list but place nowhere, and how many of each to build.
_EXTRA_RECEPTACLE_COUNT = {"StoveBurner": 4}
# The PDDL domain refers to these type constants: every problem must declare them.
_DOMAIN_TYPE_CONSTANTS = {
    "otype": ("KnifeType", "ButterKnifeType"),
    "rtype": ("SinkBasinType", "MicrowaveType", "FridgeType"),
}


class UnsolvableGame(RuntimeError):
    """The planner found no plan, or its plan did not win in the engine."""


# ----------------------------------------------------------------------------------------------
# What the alfworld package ships


@dataclass(frozen=True)
class Knowledge:
    """The facts of ALFRED's world this generator builds from (all read from alfworld)."""

    constants: Any
    goals: dict[str, Any]
    layouts: Path

    @property
    def static_receptacles(self) -> frozenset[str]:
        c = self.constants
        return frozenset(set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES))

    @property
    def contents(self) -> dict[str, frozenset[str]]:
        """Receptacle class -> object classes it may hold (sliced variants dropped)."""
        return {
            r: frozenset(o for o in objs if not o.endswith("Sliced"))
            for r, objs in self.constants.VAL_RECEPTACLE_OBJECTS.items()
        }

    def room_type(self, scene: int) -> str:
        for name, numbers in self.constants.SCENE_TYPE.items():
            if scene in numbers:
                return name
        raise ValueError(f"unknown floor plan {scene}")

    def scenes(self, split: str) -> list[int]:
        """Floor plans of a split: ALFRED's train scenes for train/valid_seen, its held-out
        scenes for valid_unseen (so unseen games are in rooms never trained on)."""
        c = self.constants
        numbers = c.TEST_SCENE_NUMBERS if split == "valid_unseen" else c.TRAIN_SCENE_NUMBERS
        return [n for n in numbers if (self.layouts / f"FloorPlan{n}-objects.json").exists()]


@cache
def knowledge() -> Knowledge:
    constants = engine.load_data_module("gen/constants.py")
    goals = engine.load_data_module("gen/goal_library.py").gdict
    return Knowledge(constants, goals, engine.package_dir() / "gen" / "layouts")


# ----------------------------------------------------------------------------------------------
# Scenes


@dataclass
class Thing:
    """A receptacle or an object of a generated scene."""

    cls: str
    id: str  # ALFRED object id, e.g. "Apple|-01.23|+00.98|+00.43"
    location: str  # ALFRED location, e.g. "loc|-3|5|2|45"
    host: Thing | None = None  # the receptacle an object starts in
    facts: list[str] = field(default_factory=list)


@dataclass
class Task:
    task_type: str
    obj: str
    recep: str  # parent target ("" for look_at_obj_in_light)
    toggle: str  # toggle target ("" unless look_at_obj_in_light)
    text: str


def _coord(v: float) -> str:
    return f"{v:+06.2f}".replace("+-", "-")


def _location(x: float, z: float, rotation: int, horizon: int) -> str:
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{rotation // 90 % 4}|{horizon}"


def _pddl_name(alfred_id: str) -> str:
    """ALFRED ids in PDDL, as ALFRED's own writer spells them (see its fix_pddl_str_chars)."""
    out = alfred_id
    for a, b in (
        ("-", "_minus_"),
        ("|", "_bar_"),
        ("+", "_plus_"),
        (".", "_dot_"),
        (",", "_comma_"),
    ):
        out = out.replace(a, b)
    return out


class _Scene:
    """Receptacles of one floor plan, built from its layout files."""

    def __init__(self, scene: int, rng: random.Random) -> None:
        k = knowledge()
        self.scene = scene
        self.room = k.room_type(scene)
        self.classes = json.loads((k.layouts / f"FloorPlan{scene}-objects.json").read_text())
        poses = json.loads((k.layouts / f"FloorPlan{scene}-openable.json").read_text())
        import numpy as np  # numpy is a dependency of gagpo; the layout is a .npy grid

        self.points = [tuple(p) for p in np.load(k.layouts / f"FloorPlan{scene}-layout.npy")]
        static = k.static_receptacles
        self.receptacles: list[Thing] = []
        taken: set[str] = set()
        for key in sorted(poses):
            x, z, rotation, horizon = poses[key]
            cls = key.split("|")[0]
            rid = key
            if cls in ("Sink", "Bathtub"):  # the basin is the receptacle: "Sink|...|SinkBasin"
                cls += "Basin"
                if not key.endswith(cls):
                    rid = f"{key}|{cls}"
            if cls not in static or rid in taken:
                continue
            taken.add(rid)
            self.receptacles.append(Thing(cls, rid, _location(x, z, int(rotation), int(horizon))))
        present = {r.cls for r in self.receptacles}
        for cls in self.classes:
            basin = cls + "Basin" if cls in ("Sink", "Bathtub") else cls
            if basin not in static or basin in present:
                continue
            present.add(basin)
            count = _EXTRA_RECEPTACLE_COUNT.get(basin, 1)
            # Burners come in pairs seen from one pose, as in ALFRED's kitchens.
            location = None
            for i in range(count):
                x, z = rng.choice(self.points)
                y = rng.uniform(0.0, 1.2)
                rid = f"{cls}|{_coord(x + 0.3)}|{_coord(y)}|{_coord(z + 0.3)}"
                if basin != cls:
                    rid += f"|{basin}"
                if location is None or i % 2 == 0:
                    location = _location(
                        x, z, rng.choice((0, 90, 180, 270)), rng.choice((30, 45, 60))
                    )
                self.receptacles.append(Thing(basin, rid, location))
        self.by_class: dict[str, list[Thing]] = {}
        for r in self.receptacles:
            self.by_class.setdefault(r.cls, []).append(r)

    def hosts_for(self, obj_cls: str) -> list[Thing]:
        contents = knowledge().contents
        if obj_cls in _LAMPS:
            for cls in _LAMP_HOSTS:
                if cls in self.by_class:
                    return self.by_class[cls]
            return []
        return [r for r in self.receptacles if obj_cls in contents.get(r.cls, ())]

    def placeable(self) -> list[str]:
        """Object classes of this room that some receptacle of it can hold."""
        k = knowledge()
        movable = set(k.constants.MOVABLE_RECEPTACLES)
        allowed = set().union(*k.contents.values())
        out = []
        for cls in dict.fromkeys(self.classes):
            holdable = cls in allowed and (cls not in k.static_receptacles or cls in movable)
            if (cls in _LAMPS or holdable) and self.hosts_for(cls):
                out.append(cls)
        return out


def _task_candidates(scene: _Scene, task_type: str) -> list[tuple[str, str, str]]:
    """(object, parent receptacle, toggle) class triples this room supports for a task type."""
    k = knowledge()
    if scene.room not in k.constants.GOALS_VALID[task_type]:
        return []
    placeable = [c for c in scene.placeable() if c not in _LAMPS]
    contents = k.contents
    if task_type == "look_at_obj_in_light":
        lamps = [c for c in _LAMPS if c in scene.placeable()]
        return [(o, "", lamps[0]) for o in placeable] if lamps else []
    appliance = _APPLIANCE.get(task_type, ())
    if appliance and appliance[0] not in scene.by_class:
        return []
    prop = _ACTION_PROPERTY.get(task_type)
    out = []
    for o in placeable:
        if prop and o not in k.constants.VAL_ACTION_OBJECTS[prop]:
            continue
        for r in sorted(scene.by_class):
            if r in appliance or o not in contents.get(r, ()):
                continue
            # The object must be able to start somewhere other than the goal receptacle.
            if any(h.cls != r for h in scene.hosts_for(o)):
                out.append((o, r, ""))
    return out


def _task_text(task_type: str, obj: str, recep: str, toggle: str, rng: random.Random) -> str:
    template = rng.choice(knowledge().goals[task_type]["templates"])
    return template.format(obj=obj.lower(), recep=recep.lower(), toggle=toggle.lower(), mrecep="")


def _goal_pddl(task: Task) -> str:
    text = knowledge().goals[task.task_type]["pddl"]
    text = text.format(obj=task.obj, recep=task.recep, toggle=task.toggle, mrecep="")
    return text.replace("#", "-")  # the goal library writes '#' where PDDL needs '-'


# ----------------------------------------------------------------------------------------------
# One game


@dataclass
class GeneratedGame:
    """A generated game, ready to write: its folder name parts, files and walkthrough."""

    task: Task
    scene: int
    trial: str
    problem: str
    traj_data: dict[str, Any]
    walkthrough: list[str] = field(default_factory=list)
    # What the problem was built from, kept for the planning problem (not written out).
    receptacles: list[Thing] = field(default_factory=list, repr=False)
    things: list[Thing] = field(default_factory=list, repr=False)
    start: str = ""

    @property
    def task_dir(self) -> str:
        target = self.task.recep or self.task.toggle
        return f"{self.task.task_type}-{self.task.obj}-None-{target}-{self.scene}"

    def game_json(self) -> dict[str, Any]:
        return game_file_json(
            engine.domain_text(), engine.grammar_text(), self.task.text, self.problem,
            self.walkthrough,
        )


def game_file_json(
    domain: str, grammar: str, task_text: str, problem: str, walkthrough: list[str]
) -> dict[str, Any]:
    """A game.tw-pddl's content: ALFWorld's domain and grammar (its task text, "UNKNOWN GOAL",
    replaced by the game's), the game's problem and its walkthrough."""
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", task_text),
        "pddl_problem": problem,
        "solvable": True,
        "walkthrough": walkthrough,
    }


def sample_game(
    split: str, index: int, seed: int = 0, task_type: str | None = None
) -> GeneratedGame:
    """Game ``index`` of ``split`` for ``seed`` (not yet checked solvable).

    Task types cycle through the six in order unless ``task_type`` is given; the floor plan is
    drawn among the split's plans whose room type ALFRED allows for the task.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    rng = random.Random(f"gagpo-alfworld:{seed}:{split}:{index}")
    task_type = task_type or TASK_TYPES[index % len(TASK_TYPES)]
    k = knowledge()
    scenes = k.scenes(split)
    for _ in range(200):
        scene = _Scene(rng.choice(scenes), rng)
        candidates = _task_candidates(scene, task_type)
        if candidates:
            break
    else:
        raise RuntimeError(f"no floor plan of {split} supports {task_type}")
    obj, recep, toggle = rng.choice(candidates)
    task = Task(task_type, obj, recep, toggle, _task_text(task_type, obj, recep, toggle, rng))
    things = _populate(scene, task, rng)
    start = _start_location(scene, rng)
    trial_name = f"trial_G{seed}_{index:06d}"
    problem = _problem_text(scene.receptacles, things, task, start, trial_name)
    traj = {
        "task_type": task_type,
        "task_id": trial_name,
        "pddl_params": {
            "object_target": obj,
            "parent_target": recep,
            "toggle_target": toggle,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"floor_plan": f"FloorPlan{scene.scene}", "scene_num": scene.scene},
        "turk_annotations": {"anns": [{"task_desc": task.text, "assignment_id": "generated"}]},
        "generator": {"name": GENERATOR_TAG, "seed": seed, "split": split, "index": index},
    }
    return GeneratedGame(
        task, scene.scene, trial_name, problem, traj, [], scene.receptacles, things, start
    )


def _populate(scene: _Scene, task: Task, rng: random.Random) -> list[Thing]:
    """Objects of the room: 1-3 of each placeable class, each in a receptacle that may hold it.

    Instances of the task's object never start in a receptacle of the goal's class (the goal
    would hold at reset); pick-two tasks get at least two of them.
    """
    things: list[Thing] = []
    ids: set[str] = set()
    for cls in scene.placeable():
        if cls in _LAMPS and cls not in (task.toggle, "DeskLamp"):
            continue  # one lamp class per room is enough; a floor lamp only when it is the task's
        count = rng.choice((1, 1, 1, 2, 2, 3))
        if cls == task.obj:
            count = max(count, 2 if task.task_type == "pick_two_obj_and_place" else 1)
        if cls in _LAMPS:
            count = 1
        hosts = scene.hosts_for(cls)
        if cls == task.obj and task.recep:
            hosts = [h for h in hosts if h.cls != task.recep]
        for _ in range(count):
            host = rng.choice(hosts)
            for _attempt in range(100):
                x, y, z = rng.uniform(-3.0, 3.0), rng.uniform(0.0, 2.0), rng.uniform(-3, 3)
                oid = f"{cls}|{_coord(x)}|{_coord(y)}|{_coord(z)}"
                if oid not in ids:
                    break
            ids.add(oid)
            things.append(Thing(cls, oid, host.location, host))
    return things


def _start_location(scene: _Scene, rng: random.Random) -> str:
    """A reachable pose where no receptacle stands ("You are in the middle of a room...")."""
    used = {r.location for r in scene.receptacles}
    for _ in range(1000):
        x, z = rng.choice(scene.points)
        loc = _location(x, z, rng.choice((0, 90, 180, 270)), 30)
        if loc not in used:
            return loc
    raise RuntimeError("no free start location")


def _problem_text(
    receptacles: list[Thing], things: list[Thing], task: Task, start: str, name: str
) -> str:
    """The PDDL problem, in the shape of ALFWorld's initial_state.pddl files."""
    k = knowledge()
    c = k.constants
    static = sorted(k.static_receptacles)
    otypes = sorted(
        (set(c.OBJECTS) | set(c.MOVABLE_RECEPTACLES)) - set(static) - {"Sink", "Bathtub"}
    )
    otypes = [o for o in otypes if not o.endswith("Sliced")]
    movable = set(c.MOVABLE_RECEPTACLES)
    actions = c.VAL_ACTION_OBJECTS
    contents = k.contents
    n = _pddl_name

    decl = ["agent1 - agent"]
    decl += [f"{o}Type - otype" for o in otypes]
    decl += [f"{r}Type - rtype" for r in static]
    for kind, names in _DOMAIN_TYPE_CONSTANTS.items():
        declared = {d.split(" - ")[0] for d in decl}
        decl += [f"{t} - {kind}" for t in names if t not in declared]
    decl += [f"{n(t.id)} - object" for t in things]
    decl += [f"{n(r.id)} - receptacle" for r in receptacles]
    locations = dict.fromkeys([r.location for r in receptacles] + [start])
    decl += [f"{n(loc)} - location" for loc in locations]

    init = ["(= (totalCost) 0)", f"(atLocation agent1 {n(start)})"]
    for r in receptacles:
        init.append(f"(receptacleType {n(r.id)} {r.cls}Type)")
        init.append(f"(receptacleAtLocation {n(r.id)} {n(r.location)})")
        if r.cls in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {n(r.id)})")
    present_objects = sorted({t.cls for t in things})
    for rcls in sorted({r.cls for r in receptacles}):
        for ocls in present_objects:
            if ocls in contents.get(rcls, ()):
                init.append(f"(canContain {rcls}Type {ocls}Type)")
    fridges = {r.id for r in receptacles if r.cls == "Fridge"}
    for t in things:
        o = n(t.id)
        init.append(f"(objectType {o} {t.cls}Type)")
        init.append(f"(objectAtLocation {o} {n(t.location)})")
        assert t.host is not None
        init.append(f"(inReceptacle {o} {n(t.host.id)})")
        if t.cls in _LAMPS:
            # ALFRED marks only the task's lamp toggleable (other lamps give no "use" command).
            if t.cls == task.toggle:
                init.append(f"(toggleable {o})")
            continue
        init.append(f"(pickupable {o})")
        if t.cls in movable:
            init.append(f"(isReceptacleObject {o})")
        for prop, pred in (
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
            ("Sliceable", "sliceable"),
        ):
            if t.cls in actions[prop]:
                init.append(f"({pred} {o})")
        # As in ALFRED's writer, a target object that starts in the fridge is already cool.
        if t.cls == task.obj and t.host.id in fridges and t.cls in actions["Coolable"]:
            init.append(f"(isCool {o})")

    pad = "\n        "
    return (
        f"\n(define (problem plan_{name})\n(:domain alfred)\n(:objects{pad}"
        + pad.join(decl)
        + "\n        )\n\n(:init"
        + pad
        + pad.join(init)
        + "\n        )\n"
        + _goal_pddl(task)
    )


# ----------------------------------------------------------------------------------------------
# Solvability (once, at generation) and writing


def planning_problem(game: GeneratedGame) -> str:
    """The game's problem cut down to what its task involves, for the planner.

    fast-downward's replanner (as TextWorld builds it) runs a uniform-cost search: on a kitchen
    with twenty openable cabinets it explores every open/closed combination and runs out of
    memory. Objects and receptacles the task does not involve change nothing a plan needs (the
    domain has no capacities), so the plan is searched on the task's object instances, the
    receptacles they start in, the appliances, a few goal receptacles and the lamp; it is then
    checked by replaying it in the full game.
    """
    task = game.task
    keep_things = [t for t in game.things if t.cls in (task.obj, task.toggle)]
    hosts = {t.host.id for t in keep_things if t.host is not None}
    appliances = set(_APPLIANCE.get(task.task_type, ()))
    goal = sorted((r for r in game.receptacles if r.cls == task.recep), key=lambda r: r.id)[:2]
    keep = {r.id for r in goal} | hosts
    receptacles = [r for r in game.receptacles if r.id in keep or r.cls in appliances]
    return _problem_text(receptacles, keep_things, task, game.start, game.trial + "_plan")


def _names(env: Any) -> dict[str, str]:
    """PDDL id -> the name the demangler gave it, in a started engine."""
    return {info.id: info.name for info in env._entity_infos.values()}


class _Solver:
    """The planner's engine, reused across games: every engine start loads a private copy of
    fast-downward's library that is never unloaded, so starting one per game would leak."""

    def __init__(self) -> None:
        self.planner: Any = None

    def load(self, which: str, data: dict[str, Any], infos: Any) -> Any:
        env = getattr(self, which)
        if env is None:
            env = engine.start(data, infos)
            setattr(self, which, env)
        else:
            env.load(data)
        return env


_solver = _Solver()


def solve(game: GeneratedGame) -> list[str]:
    """A plan for ``game`` (commands of the full game): fast-downward plans on the task's part
    of the scene (the reference engine's walkthrough), and the plan is replayed in the full game
    on the native engine until ``won``."""
    full = game.game_json()
    small = {**full, "pddl_problem": planning_problem(game), "walkthrough": None}
    planner = _solver.load(
        "planner", small, engine.request_infos(facts=False, extras=["walkthrough"])
    )
    _, infos = planner.reset()
    plan = list(infos.get("extra.walkthrough") or [])
    if not plan:
        raise UnsolvableGame(f"no plan for {game.task_dir}/{game.trial}")
    small_names = _names(planner)

    # The plan is checked on the native engine (the engine the game will be played on).
    from gagpo.envs.alfworld.native import NativeEnv

    env = NativeEnv()
    env.load_data(full, f"{game.task_dir}/{game.trial}")
    _, infos = env.reset()
    assert env.game is not None
    full_names = dict(zip(env.game.world.names, env.game.shown, strict=True))
    rename = {small_names[i]: full_names[i] for i in small_names if small_names[i].strip()}
    pattern = re.compile(
        "|".join(rf"\b{re.escape(n)}(?!\d)" for n in sorted(rename, key=len, reverse=True))
    )
    commands = [pattern.sub(lambda m: rename[m.group(0)], c) for c in plan]
    won = infos["won"]
    for command in commands:
        if command not in infos["admissible_commands"]:
            raise UnsolvableGame(f"planned command {command!r} is not admissible")
        _, _, _, infos = env.step(command)
        won = infos["won"]
    if not won:
        raise UnsolvableGame(f"plan for {game.task_dir}/{game.trial} does not win")
    return commands


def write_game(game: GeneratedGame, split_dir: Path) -> Path:
    """Write a solved game's three files; returns its game.tw-pddl path."""
    folder = split_dir / game.task_dir / game.trial
    return write_trial(folder, game.problem, game.traj_data, game.game_json())


def write_trial(
    folder: Path, problem: str, traj_data: dict[str, Any], game_json: dict[str, Any]
) -> Path:
    """A trial folder's three files, as the official layout has them (the shipped default set
    is written by this function too, so its files are byte for byte the generator's)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_state.pddl").write_text(problem, encoding="utf-8")
    (folder / "traj_data.json").write_text(json.dumps(traj_data, indent=1), encoding="utf-8")
    path = folder / "game.tw-pddl"
    path.write_text(json.dumps(game_json), encoding="utf-8")
    return path


def generate_games(
    out_dir: str | os.PathLike[str],
    split: str,
    n: int,
    seed: int = 0,
    progress: bool | Callable[[int, int], None] = False,
    start: int = 0,
    task_types: Sequence[str] | None = None,
) -> list[Path]:
    """Generate games ``start .. start+n-1`` of ``split`` under ``out_dir/json_2.1.1/<split>``.

    Each game is solved once (its plan becomes the walkthrough); a game the planner cannot solve
    is replaced by a re-draw under the next sub-seed, so the set stays deterministic. ``progress``
    is True for a line per 10 games on stderr, or a callback ``(done, n)``. Returns the
    game.tw-pddl paths.
    """
    from gagpo.envs.alfworld import speedups

    engine.require()
    split_dir = Path(out_dir) / LAYOUT_DIR / split
    types = tuple(task_types) if task_types else TASK_TYPES
    paths = []
    t0 = time.perf_counter()
    with speedups.enabled():
        for i in range(start, start + n):
            task_type = types[i % len(types)]
            for attempt in range(20):
                index = i if attempt == 0 else i + 1_000_003 * attempt
                game = sample_game(split, index, seed, task_type)
                try:
                    game.walkthrough = solve(game)
                    break
                except UnsolvableGame:
                    continue
            else:
                raise RuntimeError(f"could not generate a solvable game {i} of {split}")
            paths.append(write_game(game, split_dir))
            done = i - start + 1
            if callable(progress):
                progress(done, n)
            elif progress and (done % 10 == 0 or done == n):
                rate = done / (time.perf_counter() - t0)
                print(f"[alfworld] {split}: {done}/{n} games ({rate:.1f}/s)", flush=True)
    return paths


def scene_size(problem: str) -> tuple[int, int]:
    """(objects, receptacles) declared in a PDDL problem: the scene size used in reports."""
    objects = receptacles = 0
    for line in problem.splitlines():
        line = line.strip()
        if line.endswith(" - object") and "_bar_" in line:
            objects += 1
        elif line.endswith(" - receptacle"):
            receptacles += 1
    return objects, receptacles
