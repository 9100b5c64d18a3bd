"""One product record, and how the original loader derives it from an items_shuffle record.

Derived fields follow the original loader: Title = name, Description = full_description,
BulletPoints = small_description, prices from every ``$`` chunk (first two kept, none ->
100.0), option names and values lower-cased with ``/`` shown as `` | ``, attributes from
items_ins_v2 or ``['DUMMY_ATTR']``. The catalog (:mod:`gagpo.servers.webshop.catalog`) and the
on-disk store (:mod:`gagpo.servers.webshop.store`) both build products here.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

DEFAULT_PRICE = 100.0


@dataclass(frozen=True, slots=True)
class Product:
    """One product as the shop shows it and the reward reads it."""

    asin: str
    title: str
    description: str
    bullet_points: tuple[str, ...]
    pricing: tuple[float, ...]
    """One price, or the low and high end of a price range."""
    price_tag: str
    """As pages show it: ``$12.99`` or ``$10.0 to $20.0`` (float repr, as the original)."""
    price: float
    """The price the reward compares with the goal's limit (seeded draw inside a range)."""
    options: dict[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str
    image: str | None = None
    human_instructions: tuple[dict[str, Any], ...] = ()
    """The product's entries of items_human_ins.json, in file order."""
    synthetic_instruction: str | None = None
    synthetic_attributes: tuple[str, ...] = ()

    @property
    def search_text(self) -> str:
        """What the search index sees: lower(Title + Description + first bullet + options)."""
        parts = [self.title, self.description, self.bullet_points[0] if self.bullet_points else ""]
        for values in self.options.values():
            parts.extend(values)
        return " ".join(p for p in parts if p).lower()


def parse_pricing(pricing: Any) -> tuple[tuple[float, ...], str]:
    """Prices and price tag from a ``pricing`` field, as the original loader derives them."""
    if not pricing or not isinstance(pricing, str):
        return (DEFAULT_PRICE,), f"${DEFAULT_PRICE}"
    prices: list[float] = []
    for chunk in pricing.split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", chunk)
        try:
            prices.append(float(digits))
        except ValueError:
            continue
    if not prices:
        return (DEFAULT_PRICE,), f"${DEFAULT_PRICE}"
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def reward_price(asin: str, pricing: tuple[float, ...]) -> float:
    """The price the reward uses. The original draws a range's price with an unseeded RNG;
    ours is seeded by the ASIN, so it is the same in every process and run."""
    if len(pricing) == 1:
        return pricing[0]
    rng = random.Random(f"price:{asin}")
    return rng.uniform(pricing[0], pricing[1])


def parse_options(customization_options: Any) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    if not isinstance(customization_options, dict):
        return options
    for name, contents in customization_options.items():
        if not contents:
            continue
        values = tuple(
            str(c.get("value", "")).strip().replace("/", " | ").lower()
            for c in contents
            if isinstance(c, dict)
        )
        options[str(name).lower()] = values
    return options


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def product_from_record(
    record: dict[str, Any],
    ins_v2: dict[str, Any] | None = None,
    human_ins: dict[str, Any] | None = None,
) -> Product:
    """Build a :class:`Product` from one items_shuffle record and the attribute files."""
    asin = str(record["asin"])
    title = str(record.get("name") or "")
    description = str(record.get("full_description") or "")
    bullets = tuple(_as_list(record.get("small_description")))
    pricing, price_tag = parse_pricing(record.get("pricing"))
    options = parse_options(record.get("customization_options"))
    attr_entry = (ins_v2 or {}).get(asin) or {}
    attributes = tuple(attr_entry.get("attributes") or ()) or ("DUMMY_ATTR",)
    images = record.get("images") or []
    return Product(
        asin=asin,
        title=title,
        description=description,
        bullet_points=bullets,
        pricing=pricing,
        price_tag=price_tag,
        price=reward_price(asin, pricing),
        options=options,
        attributes=attributes,
        category=str(record.get("category") or ""),
        query=str(record.get("query") or "").lower().strip(),
        product_category=str(record.get("product_category") or ""),
        image=images[0] if images else None,
        human_instructions=tuple((human_ins or {}).get(asin) or ()),
        synthetic_instruction=attr_entry.get("instruction"),
        synthetic_attributes=tuple(attr_entry.get("instruction_attributes") or ()),
    )
