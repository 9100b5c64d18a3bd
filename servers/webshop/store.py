"""A catalog on disk: products converted once from the original files, read on demand.

The original's 1.18M-product files hold about 1.6 GB of JSON; loading them as Python objects
takes about 15 GB. Instead, the files are streamed once (ijson) into a compact store keyed by
their content: one JSON record per product in ``products.bin``, their byte offsets in
``offsets.npy`` and the ASINs sorted for lookup in ``asins.npy``. Serving memory-maps these and
decodes a product only when a page or the reward needs it, so memory stays flat whatever the
catalog size. Goal lists are stored beside the products the same way.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import ijson
import numpy as np

from gagpo.servers.lru import BoundedLRU
from gagpo.servers.webshop.product import Product, product_from_record

STORE_VERSION = 2
ASIN_LEN = 10
T = TypeVar("T")


def _encode(p: Product) -> bytes:
    return json.dumps(
        [
            p.asin,
            p.title,
            p.description,
            p.bullet_points,
            p.pricing,
            p.price_tag,
            p.price,
            list(p.options.items()),
            p.attributes,
            p.category,
            p.query,
            p.product_category,
            p.image,
            p.human_instructions,
            p.synthetic_instruction,
            p.synthetic_attributes,
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")


def _decode(raw: bytes) -> Product:
    (
        asin,
        title,
        desc,
        bullets,
        pricing,
        tag,
        price,
        options,
        attrs,
        category,
        query,
        product_category,
        image,
        human,
        syn_ins,
        syn_attrs,
    ) = json.loads(raw)
    return Product(
        asin=asin,
        title=title,
        description=desc,
        bullet_points=tuple(bullets),
        pricing=tuple(pricing),
        price_tag=tag,
        price=price,
        options={k: tuple(v) for k, v in options},
        attributes=tuple(attrs),
        category=category,
        query=query,
        product_category=product_category,
        image=image,
        human_instructions=tuple(human),
        synthetic_instruction=syn_ins,
        synthetic_attributes=tuple(syn_attrs),
    )


def build_store(
    files: dict[str, Path],
    out: Path,
    num_products: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Stream the original files into a store in ``out``.

    Records are kept as the original loader keeps them: asin ``'nan'``, longer than 10
    characters or already seen are skipped; ``num_products`` keeps only the first records.
    """
    ins_v2: dict[str, Any] = {}
    human: dict[str, Any] = {}
    if "items_ins_v2" in files:
        with open(files["items_ins_v2"], "rb") as f:
            ins_v2 = {k: v for k, v in ijson.kvitems(f, "", use_float=True)}
    if "items_human_ins" in files:
        with open(files["items_human_ins"], "rb") as f:
            human = {k: v for k, v in ijson.kvitems(f, "", use_float=True)}
    asins: list[str] = []

    def products() -> Iterator[bytes]:
        seen: set[str] = set()
        with open(files["items_shuffle"], "rb") as src:
            for n, record in enumerate(ijson.items(src, "item", use_float=True)):
                if num_products is not None and n >= num_products:
                    break
                asin = str(record.get("asin", "nan"))
                if asin == "nan" or len(asin) > ASIN_LEN or asin in seen:
                    continue
                seen.add(asin)
                asins.append(asin)
                if progress is not None and len(asins) % 10_000 == 0:
                    progress(len(asins))
                yield _encode(product_from_record(record, ins_v2, human))

    write_records(out, "products", products())
    keys = np.asarray(asins, dtype=f"S{ASIN_LEN}")
    order = np.argsort(keys, kind="stable")
    np.save(out / "asins.npy", keys[order])
    np.save(out / "asin_order.npy", order.astype(np.int64))
    (out / "store.json").write_text(json.dumps({"version": STORE_VERSION, "n": len(asins)}))


class RecordFile(Sequence[T]):
    """Records stored as concatenated JSON texts (``<name>.bin``) with their byte offsets
    (``<name>.offsets.npy``), memory-mapped and decoded on access (recent ones cached, bounded
    by bytes too: clients choose which products are opened, and some records are large)."""

    def __init__(
        self,
        directory: Path,
        name: str,
        decode: Callable[[bytes], T],
        cache_size: int = 16_384,
        cache_bytes: int = 64 << 20,
    ) -> None:
        self.directory = Path(directory)
        self._offsets = np.load(self.directory / f"{name}.offsets.npy", mmap_mode="r")
        path = self.directory / f"{name}.bin"
        self._data: mmap.mmap | bytes = b""
        if path.stat().st_size:
            with open(path, "rb") as f:  # the mapping outlives the file object
                self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._decode = decode
        self._cache: BoundedLRU[int, T] = BoundedLRU(cache_size, cache_bytes)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _load(self, i: int) -> T:
        return self._decode(self._data[int(self._offsets[i]):int(self._offsets[i + 1])])

    def _get(self, i: int) -> T:
        value = self._cache.get(i)
        if value is None:
            value = self._load(i)
            self._cache.put(i, value)
        return value

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record index {i} out of range")
        return self._get(i)

    def __iter__(self) -> Iterator[T]:
        # A full scan decodes without filling the cache.
        for i in range(len(self)):
            yield self._load(i)


def write_records(directory: Path, name: str, records: Iterable[bytes]) -> int:
    """Write encoded records as a :class:`RecordFile`; returns their number."""
    offsets = [0]
    with open(directory / f"{name}.bin", "wb") as f:
        for raw in records:
            f.write(raw)
            offsets.append(offsets[-1] + len(raw))
    np.save(directory / f"{name}.offsets.npy", np.asarray(offsets, dtype=np.int64))
    return len(offsets) - 1


class ProductStore(RecordFile[Product]):
    """The products of a store, in load order, with ASIN lookup."""

    def __init__(self, directory: Path, cache_size: int = 16_384) -> None:
        super().__init__(directory, "products", _decode, cache_size)
        self._asins = np.load(self.directory / "asins.npy", mmap_mode="r")
        self._order = np.load(self.directory / "asin_order.npy", mmap_mode="r")

    def position(self, asin: str) -> int | None:
        """Catalog position of ``asin`` (exact, or upper-cased), or None."""
        for key in {asin, asin.upper()}:
            try:
                k = key.encode("ascii")
            except UnicodeEncodeError:
                continue
            if not k or len(k) > ASIN_LEN:
                continue
            j = int(np.searchsorted(self._asins, k))
            if j < len(self._asins) and self._asins[j] == k:
                return int(self._order[j])
        return None
