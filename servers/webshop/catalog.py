"""The product catalog: loading WebShop's data files (original format) into products.

The original files are read unchanged:

* ``items_shuffle*.json``: a list of product records (asin, name, full_description,
  small_description, pricing, customization_options, images, category, query,
  product_category; other keys ignored);
* ``items_ins_v2*.json``: ``{asin: {attributes, instruction, instruction_attributes}}``;
* ``items_human_ins.json``: ``{asin: [{instruction, instruction_attributes,
  instruction_options, ...}]}``.

Each record becomes a :class:`~gagpo.servers.webshop.product.Product` as the original loader
derives it (:func:`~gagpo.servers.webshop.product.product_from_record`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gagpo.common.cache import build_once, cache_dir
from gagpo.servers.webshop.product import Product
from gagpo.servers.webshop.store import STORE_VERSION, ProductStore, build_store


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
    files = find_catalog_files(directory)
    fingerprint = fingerprint_files(sorted(files.values()))
    if num_products is not None:
        fingerprint += f"-{num_products}"
    target = cache_dir() / "store" / f"v{STORE_VERSION}-{fingerprint}"
    build_once(target, lambda out: build_store(files, out, num_products, progress))
    return Catalog(products=ProductStore(target), fingerprint=fingerprint, source=str(directory))
