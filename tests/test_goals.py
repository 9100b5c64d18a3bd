"""Goals are seeded: two processes that each build them from scratch (fresh caches, their own
hash seeds, nothing shared in memory) get the very same goals, price limits included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shop_pages import write_tricky_catalog

from gagpo.servers.webshop.goals import PRICE_STEPS

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: builds the store and both goal lists from the catalog files.
BUILD = """
import dataclasses, json, sys
from gagpo.servers.webshop.catalog import load_catalog
from gagpo.servers.webshop.goals import build_goals
cat = load_catalog(sys.argv[1])
out = {"prices": [p.price for p in cat.products]}
for kind in ("human", "synthetic"):
    out[kind] = [dataclasses.asdict(g) for g in build_goals(cat, kind)]
print(json.dumps(out))
"""


def _build_in_fresh_process(catalog: Path, cache: Path, hash_seed: str) -> dict:
    assert not cache.exists() or not any(cache.iterdir())  # nothing to read back
    env = {**os.environ, "GAGPO_CACHE": str(cache), "PYTHONHASHSEED": hash_seed,
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", BUILD, str(catalog)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


def test_goals_are_the_same_when_built_twice_from_scratch(tmp_path):
    catalog = write_tricky_catalog(tmp_path / "catalog", n=40)
    first = _build_in_fresh_process(catalog, tmp_path / "cache-a", "1")
    second = _build_in_fresh_process(catalog, tmp_path / "cache-b", "2")
    assert len(first["human"]) == 40 and len(first["synthetic"]) > 40
    # Not vacuous: every product's limit is drawn (all prices are below 980), and the draws
    # differ between goals, so an unseeded draw would disagree somewhere between the two runs
    # (40 human goals, each U one of three values: all equal by chance ~ (14/36)^40).
    drawn = set()
    for g in first["human"]:
        price = first["prices"][int(g["asin"][1:])]
        above = [p for p in PRICE_STEPS if p > price][:4]
        assert g["price_upper"] in above[1:]
        drawn.add(above.index(g["price_upper"]))
    assert drawn == {1, 2, 3}
    # Ranged prices (every fifth product) are drawn too, from the ASIN-seeded RNG.
    assert first["prices"] == second["prices"]
    assert first["human"] == second["human"]
    assert first["synthetic"] == second["synthetic"]
