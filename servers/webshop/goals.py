"""Goals (what the user is asked to buy), their order and their splits.

Human goals come from items_human_ins.json, synthetic goals from items_ins_v2.json plus every
combination of a product's option values, both built as the original does. The list is then
permuted exactly as ``random.Random(233).shuffle`` permutes a list of that length, so that
goal ``i`` is the original's goal ``i``: test = 0..499, eval = 500..1499, train = 1500..

Fixed quirk (documented): the original draws the price limit ``U`` with an unseeded RNG, so
instruction texts change between process starts. Ours draws it from an RNG seeded by the
goal's product and position, so every run and every process sees the same goals.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gagpo.servers.webshop.catalog import Catalog
from gagpo.servers.webshop.product import Product

GoalKind = Literal["human", "synthetic"]
PRICE_STEPS = tuple(10.0 * i for i in range(1, 100))
NO_PRICE_LIMIT = 1_000_000.0
SHUFFLE_SEED = 233
GOALS_VERSION = 2
SPLITS = {"test": (0, 500), "eval": (500, 1500), "train": (1500, None)}


@dataclass(frozen=True, slots=True, eq=False)
class Goal:
    """One shopping task: the product to find, and what the instruction asks of it."""

    asin: str
    category: str
    query: str
    name: str
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: tuple[str, ...] | dict[str, str]
    """Human goals: option texts; synthetic goals: ``{group: value}``."""
    price_upper: float
    weight: float = 1.0


def price_limit(product: Product, rng: random.Random) -> tuple[float, str]:
    """The goal's price limit U and its text: two of the first four multiples of 10 above
    the price are drawn and the larger kept; with fewer than two, no limit and no text."""
    above = [p for p in PRICE_STEPS if p > product.price][:4]
    if len(above) < 2:
        return NO_PRICE_LIMIT, ""
    upper = max(rng.sample(above, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def human_goals(catalog: Catalog) -> list[Goal]:
    goals: list[Goal] = []
    for product in catalog.products:
        for k, ins in enumerate(product.human_instructions):
            attributes = tuple(ins.get("instruction_attributes") or ())
            if not attributes:
                continue
            upper, price_text = price_limit(product, random.Random(f"{product.asin}:{k}"))
            goals.append(
                Goal(
                    asin=product.asin,
                    category=product.category,
                    query=product.query,
                    name=product.title,
                    product_category=product.product_category,
                    instruction_text=str(ins.get("instruction") or "").strip(".") + price_text,
                    attributes=attributes,
                    goal_options=tuple(ins.get("instruction_options") or ()),
                    price_upper=upper,
                )
            )
    return goals


def synthetic_goals(catalog: Catalog) -> list[Goal]:
    pending: list[tuple[Goal, tuple[str, ...]]] = []
    attribute_count: dict[str, int] = defaultdict(int)
    for product in catalog.products:
        if not product.synthetic_instruction or not product.synthetic_attributes:
            continue
        upper, price_text = price_limit(product, random.Random(f"{product.asin}:synthetic"))
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[n] for n in names)):
            chosen = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            option_text = f" with {option_text}" if option_text else ""
            goal = Goal(
                asin=product.asin,
                category=product.category,
                query=product.query,
                name=product.title,
                product_category=product.product_category,
                instruction_text=f"{product.synthetic_instruction}{option_text}{price_text}",
                attributes=product.synthetic_attributes,
                goal_options=chosen,
                price_upper=upper,
            )
            pending.append((goal, product.synthetic_attributes))
            for a in product.synthetic_attributes:
                attribute_count[a] += 1
    goals = []
    for goal, attrs in pending:
        weight = sum(1.0 / attribute_count[a] for a in attrs) / len(attrs)
        goals.append(
            Goal(**{s: getattr(goal, s) for s in Goal.__slots__ if s != "weight"}, weight=weight)
        )
    return goals


def build_goals(catalog: Catalog, kind: GoalKind = "human") -> Sequence[Goal]:
    """All goals of one kind in the original's order (built, then shuffled with seed 233).

    For a catalog opened from a store, the goals are written beside the store once and read
    back lazily, so that a large catalog's products are scanned only the first time and its
    goals cost no memory until used.
    """
    store_dir = getattr(catalog.products, "directory", None)
    if store_dir is None:
        return _build_goals(catalog, kind)
    from gagpo.servers.webshop.store import RecordFile, write_records

    name = f"goals-{kind}-v{GOALS_VERSION}"
    if not (Path(store_dir) / f"{name}.offsets.npy").exists():
        goals = _build_goals(catalog, kind)
        with tempfile.TemporaryDirectory(dir=store_dir) as tmp:
            encoded = (json.dumps(dataclasses.asdict(g)).encode() for g in goals)
            write_records(Path(tmp), name, encoded)
            os.replace(Path(tmp) / f"{name}.bin", Path(store_dir) / f"{name}.bin")
            # offsets last: their presence marks the list complete
            os.replace(Path(tmp) / f"{name}.offsets.npy", Path(store_dir) / f"{name}.offsets.npy")
    return RecordFile(Path(store_dir), name, _goal_from_json)


def _goal_from_json(raw: bytes) -> Goal:
    d = json.loads(raw)
    options = d["goal_options"]
    return Goal(
        **{
            **d,
            "attributes": tuple(d["attributes"]),
            "goal_options": options if isinstance(options, dict) else tuple(options),
        }
    )


def _build_goals(catalog: Catalog, kind: GoalKind) -> list[Goal]:
    if kind == "human":
        goals = human_goals(catalog)
    elif kind == "synthetic":
        goals = synthetic_goals(catalog)
    else:
        raise ValueError(f"goal kind must be 'human' or 'synthetic', not {kind!r}")
    random.Random(SHUFFLE_SEED).shuffle(goals)
    return goals


def split_range(split: str, n_goals: int) -> range:
    """Goal indices of a split: test 0-499, eval 500-1499, train 1500.. (clipped to n_goals)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {sorted(SPLITS)}")
    start, stop = SPLITS[split]
    stop = n_goals if stop is None else min(stop, n_goals)
    return range(min(start, n_goals), stop)
