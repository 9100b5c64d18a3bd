"""The WebShop shop: catalog, search index, goals, reward, sessions and pages; the catalog
generator (:mod:`~gagpo.servers.webshop.generator`) and the web front, HTML pages and JSON API
(:mod:`~gagpo.servers.webshop.web`), in sub-packages.

``open_shop()`` gives the shared, per-process :class:`~gagpo.servers.webshop.shop.Shop` for a
catalog: the embedded generated catalog by default (made on first use and cached), or a folder
of the original WebShop data files.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from gagpo.common.cache import build_once, cache_dir
from gagpo.servers.webshop.catalog import Catalog, load_catalog
from gagpo.servers.webshop.goals import GoalKind, build_goals

if TYPE_CHECKING:
    from gagpo.servers.webshop.shop import Shop

DEFAULT_PRODUCTS = 1000
DEFAULT_SEED = 0

_lock = threading.Lock()
_shops: dict[tuple, Shop] = {}


def generator_digest() -> str:
    """Hash of the generator's source (every module of its package): a changed generator
    never reuses a stale catalog."""
    h = hashlib.blake2b(digest_size=6)
    for path in sorted((Path(__file__).parent / "generator").glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def generated_catalog_dir(n_products: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> Path:
    """Folder of the generated catalog (original file format), written on first use."""
    from gagpo.servers.webshop.generator.families import write_catalog

    target = cache_dir() / "catalog" / f"generated-{generator_digest()}-n{n_products}-s{seed}"
    return build_once(target, lambda out: write_catalog(out, n_products=n_products, seed=seed))


def open_catalog(
    catalog: str | Path | None = None,
    *,
    num_products: int | None = None,
    seed: int = DEFAULT_SEED,
) -> Catalog:
    """A catalog folder in the original format, or the generated one when ``catalog`` is None
    (``num_products`` then sets its size, default 1,000)."""
    if catalog is None:
        return load_catalog(generated_catalog_dir(num_products or DEFAULT_PRODUCTS, seed))
    return load_catalog(catalog, num_products=num_products)


def open_shop(
    catalog: str | Path | None = None,
    *,
    goals: GoalKind = "human",
    num_products: int | None = None,
    seed: int = DEFAULT_SEED,
) -> Shop:
    """The process-wide shop for these arguments (built once, then shared)."""
    from gagpo.servers.webshop.search import SearchEngine
    from gagpo.servers.webshop.shop import Shop

    key = (str(catalog) if catalog else None, goals, num_products, seed)
    with _lock:
        shop = _shops.get(key)
        if shop is None:
            cat = open_catalog(catalog, num_products=num_products, seed=seed)
            goal_list = build_goals(cat, goals)
            if not goal_list:
                raise ValueError(f"the catalog at {cat.source} has no {goals} goals")
            shop = Shop(catalog=cat, goals=goal_list, search_engine=SearchEngine(cat))
            _shops[key] = shop
        return shop
