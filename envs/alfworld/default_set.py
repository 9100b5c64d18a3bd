"""The default generated game set, shipped inside the package: no planner, no compiler.

The default ALFWorld-style set (seed 0; train 48, valid_seen 24, valid_unseen 24 games) is what
:mod:`gagpo.envs.alfworld.generator` makes with ALFWorld's data files and fast-downward. It is
made once, here, and shipped compressed as ``data/default_set.json.gz`` (about 0.3 MB; the
folder it unpacks to is about 10 MB): for each game its PDDL problem, its ``traj_data.json``
and its walkthrough, and the sha256 of the ALFWorld domain and grammar it was made with. The
domain and grammar themselves are ALFWorld's files and are not shipped: on first use
:func:`unpack` reads them from the installed ``alfworld`` package, or else from ALFWorld
0.4.2's pure-Python wheel, which pip downloads once without installing it
(:func:`alfworld_files`), checks their hashes and writes the games in ALFWorld's layout, each
file byte for byte what the generator writes (the same writer,
:func:`gagpo.envs.alfworld.generator.write_trial`). Licence: the problems are derived from
ALFWorld's floor plans and constants; ``data/NOTICE`` says what, and carries ALFWorld's
licence.

    python -m gagpo.envs.alfworld.default_set build   # regenerate the archive (gagpo[alfworld])
    python -m gagpo.envs.alfworld.default_set check   # regenerate all and compare with it

Game ``i`` of a split depends only on ``(seed, split, i)``, so the first ``n`` games of the
shipped set are the generator's first ``n`` for any ``n`` up to the shipped size.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from gagpo.envs.alfworld.generator import (
    DEFAULT_SEED,
    DEFAULT_SIZES,
    GENERATOR_TAG,
    LAYOUT_DIR,
    game_file_json,
    write_trial,
)

ARCHIVE = Path(__file__).resolve().parent / "data" / "default_set.json.gz"
FORMAT = "gagpo ALFWorld game set, format 1"


@cache
def _load(archive: Path = ARCHIVE) -> dict[str, Any]:
    with gzip.open(archive, "rt", encoding="utf-8") as f:
        data = json.load(f)
    if data.get("format") != FORMAT or data.get("generator") != GENERATOR_TAG:
        raise ValueError(f"{archive}: not a game set of {GENERATOR_TAG!r} in {FORMAT!r}")
    return data


def shipped_sizes(archive: Path = ARCHIVE) -> dict[str, int]:
    """Games per split in the archive."""
    return {split: len(games) for split, games in _load(archive)["splits"].items()}


def shipped_seed(archive: Path = ARCHIVE) -> int:
    return int(_load(archive)["seed"])


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


ALFWORLD_VERSION = "0.4.2"
"""The ALFWorld release whose domain and grammar the default set was made with."""
ALFWORLD_MEMBERS = ("data/alfred.pddl", "data/alfred.twl2")


@cache
def alfworld_files(archive: Path = ARCHIVE) -> tuple[str, str]:
    """ALFWorld's PDDL domain and text grammar, checked against the hashes the set was made
    with: from the installed ``alfworld`` package if its files are those (read as files, the
    package never imported), else from ALFWorld 0.4.2's wheel, which pip downloads once
    without installing it (:mod:`gagpo.common.wheel_files`; 0.36 MB, no compiler).

    Raises:
        AlfworldMissing: neither gives the files (offline, with no ``alfworld`` installed).
    """
    from gagpo.common.wheel_files import WheelFilesDiffer, WheelFilesMissing, checked_wheel_files
    from gagpo.envs.alfworld.engine import AlfworldMissing

    want = dict(zip(ALFWORLD_MEMBERS, (_load(archive)["domain_sha256"],
                                       _load(archive)["grammar_sha256"]), strict=True))
    try:
        # The pinned hashes are of the text (as the set was made), not of the bytes.
        files = checked_wheel_files("alfworld", ALFWORLD_VERSION, "alfworld", want,
                                    digest=lambda path: _sha256(path.read_text("utf-8")))
    except WheelFilesDiffer:
        raise AlfworldMissing(
            f"ALFWorld {ALFWORLD_VERSION}'s alfred.pddl or alfred.twl2 as fetched is not "
            "the one the default games were made with: remove gagpo's cache of it "
            "(wheel-files/) and try again") from None
    except WheelFilesMissing as e:
        raise AlfworldMissing(
            "ALFWorld-v0's default games read ALFWorld's domain and grammar from its "
            f"{ALFWORLD_VERSION} wheel, which gagpo fetches with pip on first use: {e}. "
            f"Offline, install it by hand: pip install --no-deps "
            f"alfworld=={ALFWORLD_VERSION} (pure Python, no compiler)") from None
    domain, grammar = (files[m].read_text("utf-8") for m in ALFWORLD_MEMBERS)
    return domain, grammar


def trial_files(split: str, index: int, archive: Path = ARCHIVE) -> tuple[str, str, dict, dict]:
    """Game ``index`` of ``split``: (its folder under the split, problem, traj_data, game
    file's JSON)."""
    game = _load(archive)["splits"][split][index]
    traj = game["traj_data"]
    text = traj["turk_annotations"]["anns"][0]["task_desc"]
    domain, grammar = alfworld_files(archive)
    content = game_file_json(domain, grammar, text, game["problem"], game["walkthrough"])
    return game["dir"], game["problem"], traj, content


def unpack(
    out_dir: str | os.PathLike[str],
    sizes: dict[str, int] | None = None,
    archive: Path = ARCHIVE,
) -> dict[str, int]:
    """Write the first ``sizes[split]`` games of each split (default: all) under
    ``out_dir/json_2.1.1/<split>``; returns how many were written per split (fewer than asked
    where the archive holds fewer)."""
    have = shipped_sizes(archive)
    sizes = dict(have if sizes is None else sizes)
    written = {}
    for split, n in sizes.items():
        written[split] = min(n, have.get(split, 0))
        for i in range(written[split]):
            folder, problem, traj, content = trial_files(split, i, archive)
            write_trial(Path(out_dir) / LAYOUT_DIR / split / folder, problem, traj, content)
    return written


def read_tree(root: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every file under ``root``, by path relative to it (for comparing game sets)."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------------------------
# Making the archive (needs the generator's planner: pip install 'gagpo[alfworld]')


def pack(
    games: dict[str, list[Path]], archive: Path, seed: int, grammar: str
) -> dict[str, Any]:
    """Write ``archive`` from generated games (per split, game.tw-pddl paths in generation
    order); ``grammar`` is ALFWorld's grammar file as the generator read it (task text
    "UNKNOWN GOAL"). Checks that unpacking gives back every file byte for byte."""
    domain = None
    splits: dict[str, list[dict[str, Any]]] = {}
    for split, paths in games.items():
        entries = splits.setdefault(split, [])
        for path in paths:
            folder = path.parent
            content = json.loads(path.read_text(encoding="utf-8"))
            traj = json.loads((folder / "traj_data.json").read_text(encoding="utf-8"))
            domain = domain or content["pddl_domain"]
            entry = {
                "dir": folder.relative_to(path.parents[2]).as_posix(),
                "problem": content["pddl_problem"],
                "traj_data": traj,
                "walkthrough": content["walkthrough"],
            }
            text = traj["turk_annotations"]["anns"][0]["task_desc"]
            rebuilt = game_file_json(domain, grammar, text, entry["problem"], entry["walkthrough"])
            if rebuilt != content:
                raise ValueError(f"{path}: not rebuilt from the shared domain and grammar")
            entries.append(entry)
    data = {
        "format": FORMAT,
        "generator": GENERATOR_TAG,
        "seed": seed,
        "source": "problems derived from ALFWorld 0.4.2's layouts and constants (MIT; see "
                  "NOTICE); its alfred.pddl and alfred.twl2 are read from its wheel",
        "domain_sha256": _sha256(domain),
        "grammar_sha256": _sha256(grammar),
        "splits": splits,
    }
    blob = json.dumps(data, separators=(",", ":")).encode("utf-8")
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(blob, compresslevel=9, mtime=0))
    _load.cache_clear()
    alfworld_files.cache_clear()
    with tempfile.TemporaryDirectory() as out:
        unpack(out, archive=tmp)
        got = read_tree(Path(out) / LAYOUT_DIR)
    _load.cache_clear()
    alfworld_files.cache_clear()
    for paths in games.values():
        for path in paths:
            for name in ("game.tw-pddl", "traj_data.json", "initial_state.pddl"):
                rel = (path.parent / name).relative_to(path.parents[3]).as_posix()
                if got.pop(rel, None) != (path.parent / name).read_bytes():
                    raise ValueError(f"{rel}: unpacks to other bytes")
    if got:
        raise ValueError(f"unpacks to files the generator did not write: {sorted(got)[:3]}")
    tmp.replace(archive)
    return data


def generate(out: Path, seed: int = DEFAULT_SEED, sizes: dict[str, int] | None = None,
             progress: bool = True) -> dict[str, list[Path]]:
    """The default set made by the generator (planner and all) under ``out``."""
    from gagpo.envs.alfworld.generator import generate_games

    return {
        split: generate_games(out, split, n, seed=seed, progress=progress)
        for split, n in (sizes or DEFAULT_SIZES).items()
    }


def build(archive: Path = ARCHIVE, seed: int = DEFAULT_SEED,
          sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Regenerate the default set with the generator and write it to ``archive``."""
    from gagpo.envs.alfworld import engine

    with tempfile.TemporaryDirectory() as out:
        games = generate(Path(out), seed, sizes)
        return pack(games, archive, seed, engine.grammar_text())


def check(archive: Path = ARCHIVE) -> list[str]:
    """Regenerate every shipped game with the generator; the paths of files that differ."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        generate(Path(a), shipped_seed(archive), shipped_sizes(archive))
        unpack(b, archive=archive)
        want, got = read_tree(a), read_tree(b)
    return sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gagpo.envs.alfworld.default_set",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("build", "check"))
    args = parser.parse_args(argv)
    if args.what == "build":
        data = build()
        sizes = {s: len(g) for s, g in data["splits"].items()}
        print(f"wrote {ARCHIVE} ({ARCHIVE.stat().st_size:,} bytes): {sizes}")
        return 0
    bad = check()
    sizes = shipped_sizes()
    print(f"{sum(sizes.values())} games {sizes}: {len(bad)} files differ", *bad[:20], sep="\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
