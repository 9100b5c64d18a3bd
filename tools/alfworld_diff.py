"""Differential test: ALFWorld's reference engine and our native engine, side by side.

Both engines load the same game files and receive the same commands; after the reset and after
every step the harness compares what a player and the env see: the observation text, the
admissible commands (list and order), ``won``, the score, the commands the engine matches, and
the facts (as a multiset: the state key hashes them). Every difference is printed with the game,
the step, the command and both values; the run ends with a summary (games per split and task
type, steps, command kinds covered, mismatches, time per step of each engine) and exits with 1
on any mismatch.

Each game is played as one script of ``--steps`` commands:

1. the stored walkthrough (to the win), then commands after the win;
2. a reset, then a walk: mostly admissible commands (preferring kinds seen least so far, so
   that slice, heat, cool, clean and use come up), with ``look``, ``inventory`` and
   ``examine X`` for every receptacle and object of the game, wherever the agent is;
   commands for objects elsewhere or missing; near-misses of real commands; malformed input
   (empty, blanks, very long, unicode, control characters); padded valid commands; ``help``.

Games come from the env's game source (the generated ALFWorld-style set unless ``--data-dir``
or ``$ALFWORLD_DATA`` points at official games), all three splits, spread over the six task
types. ``--grammar-variants`` also plays each game with rewritten grammars (other wordings,
separators, rule orders and templates), which must match too since both engines derive their
text from the game's grammar.

    python -m tools.alfworld_diff --games 96 --steps 120
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = (
    "go to", "open", "close", "take", "move", "use", "heat", "cool", "clean", "slice",
    "examine", "inventory", "look", "help",
)
MALFORMED = (
    "", "   ", "\t\n", "x" * 5000, "go to " + "cabinet " * 400, "ｇｏ ｔｏ ｃａｂｉｎｅｔ １",
    "gö to cäbinet 1", "look 👀", "\u202eklool", "\x00", "look\x00", "go\x1b[31m to", "\r\n",
    "\u200blook", "look\u3000", "\ufefflook", "lo\u0301ok", "LOOK", "Look", "look.", "look!",
    "inventory please", "inv", "i", "l", "north", "put apple 1 in fridge 1", "go to",
    "take", "take  from ", "examine", "help me", "quit", "{r}", "#look.feedback#", "%s",
    "go to {r.name}", "go to [cabinet 1]", "use", "heat with", "slice with",
)


def kind_of(command: str) -> str:
    for k in KINDS:
        if command == k or command.startswith(k + " "):
            return k
    return "other"


class Mismatch(Exception):
    pass


def _facts(infos: dict[str, Any]) -> Counter:
    return Counter(
        (f.name, tuple((v.name, v.type) for v in f.arguments)) for f in infos["facts"]
    )


class Pair:
    """The two engines on one game, compared after every call."""

    def __init__(self, path: str, label: str, report: Callable[[str], None]) -> None:
        from gagpo.envs.alfworld import engine
        from gagpo.envs.alfworld.native import NativeEnv

        self.label = label
        self.report = report
        self.ref = engine.start(path)
        self.nat = NativeEnv()
        self.nat.load(path)
        self.mismatches = 0
        self.step_no = 0
        self.ref_times: list[float] = []
        self.nat_times: list[float] = []
        self.reset_times: tuple[float, float] = (0.0, 0.0)
        self.infos: dict[str, Any] = {}

    def _compare(self, command: str | None, ref: tuple, nat: tuple) -> None:
        (o1, s1, i1), (o2, s2, i2) = ref, nat
        where = f"[{self.label}] step {self.step_no} command {command!r}"
        diffs = []
        if o1 != o2:
            diffs.append(f"observation\n    reference: {o1!r}\n    native:    {o2!r}")
        if s1 != s2:
            diffs.append(f"score: reference {s1!r}, native {s2!r}")
        if i1["won"] != i2["won"]:
            diffs.append(f"won: reference {i1['won']!r}, native {i2['won']!r}")
        a1, a2 = list(i1["admissible_commands"]), list(i2["admissible_commands"])
        if a1 != a2:
            only1 = [c for c in a1 if c not in a2]
            only2 = [c for c in a2 if c not in a1]
            diffs.append(
                f"admissible commands differ (reference only: {only1}, native only: {only2}, "
                f"same set but another order: {not only1 and not only2})\n"
                f"    reference: {a1}\n    native:    {a2}"
            )
        v1 = Counter(self.ref.state["_valid_commands"])
        v2 = Counter(self.nat.valid_commands)
        if v1 != v2:
            diffs.append(f"matched commands: reference only {sorted((v1 - v2).elements())}, "
                         f"native only {sorted((v2 - v1).elements())}")
        f1, f2 = _facts(i1), _facts(i2)
        if f1 != f2:
            diffs.append(f"facts: reference only {sorted((f1 - f2).elements())}, "
                         f"native only {sorted((f2 - f1).elements())}")
        if diffs:
            self.mismatches += 1
            self.report(where + ":\n  " + "\n  ".join(diffs))
        self.infos = i1

    def reset(self) -> None:
        t0 = time.perf_counter()
        o1, i1 = self.ref.reset()
        t1 = time.perf_counter()
        o2, i2 = self.nat.reset()
        t2 = time.perf_counter()
        self.reset_times = (t1 - t0, t2 - t1)
        self.step_no = 0
        self._compare(None, (o1, 0, i1), (o2, 0, i2))

    def step(self, command: str) -> None:
        self.step_no += 1
        t0 = time.perf_counter()
        o1, s1, _, i1 = self.ref.step(command)
        t1 = time.perf_counter()
        o2, s2, _, i2 = self.nat.step(command)
        t2 = time.perf_counter()
        self.ref_times.append(t1 - t0)
        self.nat_times.append(t2 - t1)
        self._compare(command, (o1, s1, i1), (o2, s2, i2))

    @property
    def admissible(self) -> list[str]:
        return list(self.infos["admissible_commands"])


def near_misses(command: str, rng: random.Random) -> list[str]:
    """Commands one edit away from a real one."""
    out = [
        command.upper(), command + ".", command + " ", "  " + command + "\t\n",
        command.replace(" ", "  ", 1), command[:-1], command + "1", command.replace(" ", ""),
    ]
    words = command.split()
    if words and words[-1].isdigit():
        out.append(" ".join(words[:-1] + [str(int(words[-1]) + 50)]))
        out.append(" ".join(words[:-1]))
    if " from " in command:
        out.append(command.replace(" from ", " in "))
    if " to " in command:
        out.append(command.replace(" to ", " into "))
    if " with " in command:
        out.append(command.replace(" with ", " using "))
    rng.shuffle(out)
    return out


def entity_names(pair: Pair) -> tuple[list[str], list[str]]:
    """Shown names of the game's receptacles and objects (from the reference's facts)."""
    receps, objs = set(), set()
    for f in pair.infos["facts"]:
        for v in f.arguments:
            if v.type == "receptacle":
                receps.add(v.name)
            elif v.type == "object":
                objs.add(v.name)
    return sorted(receps), sorted(objs)


def slice_errand(pair: Pair) -> str | None:
    """The next command towards slicing something (take a knife, go where a sliceable object
    lies, slice it), read from the facts; None when this game cannot get there."""
    admissible = pair.admissible
    for c in admissible:
        if c.startswith("slice "):
            return c
    at = loc = held = None
    where: dict[str, str] = {}  # receptacle -> location
    inside: dict[str, str] = {}  # object -> receptacle
    kind: dict[str, str] = {}
    sliceable, closed = set(), set()
    opened = set()
    for f in pair.infos["facts"]:
        a = [v.name.strip() for v in f.arguments]
        if f.name == "atlocation":
            at = a[1]
        elif f.name == "receptacleatlocation":
            where[a[0]] = a[1]
        elif f.name == "inreceptacle":
            inside[a[0]] = a[1]
        elif f.name == "objecttype":
            kind[a[0]] = a[1]
        elif f.name == "sliceable":
            sliceable.add(a[0])
        elif f.name == "openable":
            closed.add(a[0])
        elif f.name == "opened":
            opened.add(a[0])
        elif f.name == "holds":
            held = a[1]
    closed -= opened
    loc = at
    knives = [o for o, k in kind.items() if k in ("knifetype", "butterknifetype") and o in inside]
    targets = [o for o in sliceable if o in inside]
    if held is not None and kind.get(held) not in ("knifetype", "butterknifetype"):
        moves = [c for c in admissible if c.startswith(f"move {held} to ")]
        return moves[0] if moves else next((c for c in admissible if c.startswith("go to")), None)
    if held is None:
        if not knives or not targets:
            return None
        knife = knives[0]
        recep = inside[knife]
        if where.get(recep) != loc:
            return f"go to {recep}"
        if recep in closed:
            return f"open {recep}"
        return f"take {knife} from {recep}"
    if not targets:
        return None
    recep = inside[targets[0]]
    return f"go to {recep}" if where.get(recep) != loc else None


def play_game(
    pair: Pair, walkthrough: list[str], steps: int, rng: random.Random, kinds: Counter
) -> int:
    """One game's script (see the module doc); returns the number of steps played."""
    played = 0

    def do(command: str, kind: str | None = None) -> None:
        nonlocal played
        valid = command.strip() in pair.ref.state["_valid_commands"]
        kinds[kind or (kind_of(command.strip()) if valid else "invalid")] += 1
        pair.step(command)
        played += 1

    pair.reset()
    for command in walkthrough:
        if played >= steps // 3:
            break
        do(command)
    if pair.infos["won"]:
        kinds["after the win"] += 1
        for command in [*rng.sample(pair.admissible, min(3, len(pair.admissible))), "look"]:
            do(command, "after the win")
    pair.reset()
    receps, objs = entity_names(pair)
    everything = receps + objs
    if not kinds["slice"]:  # the rarest command: walk to it on purpose
        for _ in range(12):
            command = slice_errand(pair)
            if command is None or played >= steps:
                break
            do(command)
            if command.startswith("slice "):
                break
    while played < steps:
        roll = rng.random()
        admissible = [c for c in pair.admissible if c != "help"]
        if roll < 0.55 and admissible:
            least = min(kinds[kind_of(c)] for c in admissible)
            rare = [c for c in admissible if kinds[kind_of(c)] == least]
            do(rng.choice(rare if rng.random() < 0.5 else admissible))
        elif roll < 0.65:
            do(rng.choice(["look", "inventory", "help"]))
        elif roll < 0.75 and everything:
            do("examine " + rng.choice(everything), None)
        elif roll < 0.82 and objs and receps:
            verb = rng.choice(["take {o} from {r}", "move {o} to {r}", "heat {o} with {r}",
                               "cool {o} with {r}", "clean {o} with {r}", "slice {o} with {p}",
                               "use {o}", "open {r}", "close {r}", "go to {r}"])
            do(verb.format(o=rng.choice(objs), r=rng.choice(receps), p=rng.choice(objs)))
        elif roll < 0.9 and admissible:
            do(rng.choice(near_misses(rng.choice(admissible), rng)), "near miss")
        elif roll < 0.95:
            do(rng.choice(MALFORMED), "malformed")
        else:
            do(rng.choice(["take unicorn 1 from cabinet 1", "go to moon 1", "open door 3",
                           "examine ghost 2", "use lamp 99", "move apple 9 to fridge 9"]),
               "missing object")
    return played


# -- grammar variants ----------------------------------------------------------------------------


def grammar_variants(grammar: str) -> list[tuple[str, str]]:
    """Rewritten grammars that keep the game playable: (name, grammar text)."""
    out = []
    out.append(("wording", grammar.replace("You arrive at", "You walk up to")
                .replace("you see", "there is").replace("You pick up the", "You grab the")
                .replace("Nothing happens", "Nothing happens")))
    out.append(("separators", grammar.replace('"rhs": ", "', '"rhs": " ; "')
                .replace('"rhs": ", and "', '"rhs": " plus "').replace(
                    '"rhs": "nothing"', '"rhs": "no thing at all"')))
    out.append(("templates", grammar.replace('template :: "go to [{r.name |', 'template :: '
                '"walk to [{r.name |').replace('template :: "take {o} from {r}"',
                'template :: "pick {o} out of {r}"').replace('template :: "look"',
                'template :: "look around"')))
    # Conditions reordered: the fallback productions first for examineObject (all objects look
    # "normal"), and list items drawn with definite articles.
    out.append(("rules", grammar.replace("o.indefinite + ' ' + o.name", "o.definite + ' ' + "
                "o.name.upper()").replace('"This is a hot {o.name}."',
                '"This is a {o.name}, hot ({o.type})."')))
    return out


# -- main ----------------------------------------------------------------------------------------


def pick_games(source: Any, n: int, seed: int) -> list[Any]:
    """``n`` games spread over splits and task types (round robin), in a seeded order."""
    from gagpo.envs.alfworld.generator import TASK_TYPES

    rng = random.Random(seed)
    pools: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for split in source.splits():
        for game in source.games(split):
            pools[(split, game.task_type)].append(game)
    for pool in pools.values():
        rng.shuffle(pool)
    splits = source.splits()
    # Every run of six consecutive keys covers the six task types and cycles through the splits.
    keys = [
        (splits[(i // len(TASK_TYPES) + i) % len(splits)], TASK_TYPES[i % len(TASK_TYPES)])
        for i in range(len(TASK_TYPES) * len(splits))
    ]
    keys = [k for k in keys if pools.get(k)]
    chosen = []
    while len(chosen) < n and any(pools[k] for k in keys):
        for k in keys:
            if pools[k] and len(chosen) < n:
                chosen.append(pools[k].pop())
    return chosen


def run(
    games: int, steps: int, data_dir: str | None = None, seed: int = 0,
    variants: bool = False, max_print: int = 200, out: Any = sys.stdout,
) -> dict[str, Any]:
    """Play ``games`` games of ``steps`` commands on both engines; returns the summary."""
    from gagpo.envs.alfworld import speedups
    from gagpo.envs.alfworld.games import open_source

    speedups.enable()
    source = open_source(data_dir)
    printed = 0

    def report(text: str) -> None:
        nonlocal printed
        printed += 1
        if printed <= max_print:
            print(text, file=out, flush=True)
        elif printed == max_print + 1:
            print(f"(more mismatches; only the first {max_print} are printed)", file=out)

    kinds: Counter = Counter()
    per_type: Counter = Counter()
    per_split: Counter = Counter()
    total_steps = mismatches = 0
    ref_times: list[float] = []
    nat_times: list[float] = []
    resets: list[tuple[float, float]] = []
    variant_games = 0
    t0 = time.perf_counter()
    chosen = pick_games(source, games, seed)
    with tempfile.TemporaryDirectory() as tmp:
        for gi, game in enumerate(chosen):
            rng = random.Random(f"{seed}/{game.task_id}")
            data = json.loads(game.path.read_text())
            plays = [(game.task_id, str(game.path))]
            if variants:
                for name, text in grammar_variants(data["grammar"]):
                    p = Path(tmp) / f"{gi}-{name}.tw-pddl"
                    p.write_text(json.dumps({**data, "grammar": text}))
                    plays.append((f"{game.task_id} (grammar variant: {name})", str(p)))
            for label, path in plays:
                pair = Pair(path, label, report)
                walkthrough = list(data.get("walkthrough") or [])
                if "grammar variant" in label:
                    variant_games += 1
                    walkthrough = [w.replace("go to ", "walk to ", 1) for w in walkthrough]
                n = play_game(pair, walkthrough, steps, rng, kinds)
                total_steps += n
                mismatches += pair.mismatches
                ref_times += pair.ref_times
                nat_times += pair.nat_times
                resets.append(pair.reset_times)
            per_type[game.task_type] += 1
            per_split[game.split] += 1
    elapsed = time.perf_counter() - t0
    summary = {
        "dataset": source.label,
        "games": len(chosen),
        "grammar_variant_plays": variant_games,
        "per_split": dict(per_split),
        "per_task_type": dict(per_type),
        "steps": total_steps,
        "command_kinds": dict(sorted(kinds.items())),
        "kinds_missing": [k for k in KINDS if not kinds[k]],
        "mismatches": mismatches,
        "step_ms_median": {
            "reference": round(1e3 * statistics.median(ref_times), 3) if ref_times else None,
            "native": round(1e3 * statistics.median(nat_times), 3) if nat_times else None,
        },
        "reset_ms_median_same_game": {
            "reference": round(1e3 * statistics.median(r for r, _ in resets), 2),
            "native": round(1e3 * statistics.median(n for _, n in resets), 2),
        } if resets else None,
        "seconds": round(elapsed, 1),
    }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--steps", type=int, default=60, help="commands per game")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grammar-variants", action="store_true")
    parser.add_argument("--max-print", type=int, default=200)
    args = parser.parse_args(argv)
    summary = run(args.games, args.steps, args.data_dir, args.seed, args.grammar_variants,
                  args.max_print)
    print(json.dumps(summary, indent=1))
    return 1 if summary["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
