"""The product catalog: loading WebShop's data files (original format) into products.

The original files are read unchanged:

* ``items_shuffle*.json``: a list of product records (asin, name, full_description,
  small_description, pricing, customization_options, images, category, query,
  product_category; other keys ignored);
* ``items_ins_v2*.json``: ``{asin: {attributes, instruction, instruction_attributes}}``;
* ``items_human_ins.json``: ``{asin: [{instruction, instruction_attributes,
  instruction_options, ...}]}``.

Derived fields follow the original loader: Title = name, Description = full_description,
BulletPoints = small_description, prices from every ``$`` chunk (first two kept, none ->
100.0), option names and values lower-cased with ``/`` shown as `` | ``, attributes from
items_ins_v2 or ``['DUMMY_ATTR']``.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
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


@dataclass
class Catalog:
    """Products in load order, with ASIN lookup and a content fingerprint."""

    products: Sequence[Product]
    fingerprint: str
    """Hash of the source files' bytes: keys the store and search index caches."""
    source: str = "embedded"

    def __post_init__(self) -> None:
        if not hasattr(self.products, "position"):
            self._by_asin = {p.asin: i for i, p in enumerate(self.products)}

    def __len__(self) -> int:
        return len(self.products)

    def position(self, asin: str) -> int | None:
        if hasattr(self.products, "position"):
            return self.products.position(asin)
        i = self._by_asin.get(asin)
        return self._by_asin.get(asin.upper()) if i is None else i

    def get(self, asin: str) -> Product | None:
        i = self.position(asin) if isinstance(asin, str) and asin else None
        return None if i is None else self.products[i]


CATALOG_FILES = ("items_shuffle", "items_ins_v2", "items_human_ins")


def find_catalog_files(directory: str | Path) -> dict[str, Path]:
    """Locate the three original files in ``directory`` (any suffix, e.g. ``_1000``)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"catalog folder not found: {directory}")
    found: dict[str, Path] = {}
    for stem in CATALOG_FILES:
        matches = sorted(directory.glob(f"{stem}*.json"))
        if matches:
            found[stem] = matches[0]
    if "items_shuffle" not in found:
        raise FileNotFoundError(f"no items_shuffle*.json in {directory}")
    return found


def fingerprint_files(paths: list[Path]) -> str:
    """Hash of the files' names and contents (what keys the store and index caches)."""
    h = hashlib.blake2b(digest_size=12)
    for path in paths:
        h.update(path.name.encode())
        h.update(_file_digest(Path(path)))
    return h.hexdigest()


def _file_digest(path: Path) -> bytes:
    """Content digest of one file, remembered against its (size, mtime, inode) like git's
    index does, so that reopening the 1.18M-product files does not rehash 5 GB."""
    import json
    import os

    from gagpo.servers.cache import cache_dir

    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    memo_path = cache_dir() / "file-digests.json"
    key = str(path.resolve())
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    entry = memo.get(key)
    if isinstance(entry, list) and entry[:3] == stamp:
        return bytes.fromhex(entry[3])
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.digest()
    memo[key] = [*stamp, digest.hex()]
    try:  # best effort: a lost entry only means hashing again next time
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, memo_path)
    except OSError:
        pass
    return digest


def load_catalog(
    directory: str | Path,
    num_products: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Catalog:
    """Open a catalog folder in the original WebShop format.

    The files are converted once into a compact store (see :mod:`gagpo.servers.webshop.store`),
    cached under the hash of their content, and memory-mapped from then on. Records whose
    asin is ``'nan'``, longer than 10 characters or a duplicate are skipped, as in the
    original; ``num_products`` keeps only the first records (the original's
    ``DEBUG_PROD_SIZE``).
    """
    from gagpo.servers.cache import build_once, cache_dir
    from gagpo.servers.webshop.store import STORE_VERSION, ProductStore, build_store

    files = find_catalog_files(directory)
    fingerprint = fingerprint_files(sorted(files.values()))
    if num_products is not None:
        fingerprint += f"-{num_products}"
    target = cache_dir() / "store" / f"v{STORE_VERSION}-{fingerprint}"
    build_once(target, lambda out: build_store(files, out, num_products, progress))
    return Catalog(products=ProductStore(target), fingerprint=fingerprint, source=str(directory))
