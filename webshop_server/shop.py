"""The shop's resources (catalog, search index, goals, scorer) and how to build them from a config."""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass, field

from webshop_server.catalog import CATALOG_FILES, Catalog, load_catalog
from webshop_server.goals import build_goals, read_goals
from webshop_server.reward import TitleNouns, score_purchase
from webshop_server.search import SEARCH_RETURN_N, SearchIndex

PRODUCTS_PER_PAGE = 10
# Embedded catalogs and their default sizes: the easy one (GACA-WebShop-v0) and the hard one (v1).
EMBEDDED_CATALOGS = {"embedded": 1000, "embedded-v1": 10_000}
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")


@dataclass
class ShopConfig:
    """Settings of a WebShop server (and of the in-process shop an env builds)."""

    catalog: str = field(
        default="embedded",
        metadata={
            "help": "'embedded' (generated, easy), 'embedded-v1' (generated, hard: GACA-WebShop-v1's) or a folder of "
            "original data files ($VARIABLES expand, e.g. $WEBSHOP_DATA)"
        },
    )
    catalog_files: str = field(
        default="auto",
        metadata={
            "help": "original files to load: 'auto' (the full items_shuffle.json when present), 'full', or 'small' "
            "(the 1,000-product _1000 files, verl-agent's use_small)"
        },
    )
    human_goals: bool | None = field(
        default=None,
        metadata={"help": "human instructions (items_human_ins.json) or synthetic ones; default: human when present"},
    )
    n_products: int | None = field(
        default=None,
        metadata={"help": "size of the embedded catalog; None: 1,000 for 'embedded', 10,000 for 'embedded-v1'"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the embedded catalog and its goals"})
    goals_file: str | None = field(
        default=None, metadata={"help": "serve this file's goals (from --write-goals, or the original's goal list)"}
    )
    cache_dir: str | None = field(default=None, metadata={"help": "search index cache; None: default, '': off"})
    session_ttl_s: float = field(default=600.0, metadata={"help": "idle seconds before a session expires"})
    max_sessions: int = field(default=100_000, metadata={"help": "most sessions kept at once"})
    max_query_chars: int = field(default=500, metadata={"help": "longest search query accepted"})
    max_request_bytes: int = field(default=64 * 1024, metadata={"help": "largest request body accepted"})
    max_url_chars: int = field(default=4096, metadata={"help": "longest request path accepted"})
    max_snapshot_bytes: int = field(
        default=8192, metadata={"help": "largest session snapshot saved or restored (/api/snapshot/*)"}
    )
    show_attrs: bool = field(default=False, metadata={"help": "show the Attributes button on item pages"})
    title_nouns: str = field(default="auto", metadata={"help": "'auto' (spaCy if installed), or 'fallback'"})

    def __post_init__(self) -> None:
        if "$" in self.catalog:  # "$WEBSHOP_DATA" in a config: the folder comes from the environment
            expanded = os.path.expandvars(self.catalog)
            if "$" in expanded:
                raise ValueError(
                    f"catalog={self.catalog!r} names an environment variable that is not set; set it to the folder "
                    "of the original WebShop data files (items_shuffle*.json, items_ins_v2*.json)"
                )
            self.catalog = expanded
        if self.catalog not in EMBEDDED_CATALOGS and not os.path.isdir(self.catalog):
            raise ValueError(
                f"catalog must be one of {', '.join(map(repr, EMBEDDED_CATALOGS))} or an existing folder of original "
                f"WebShop files, got {self.catalog!r}"
            )
        if self.n_products is None:
            self.n_products = EMBEDDED_CATALOGS.get(self.catalog, 1000)
        if self.catalog_files not in CATALOG_FILES:
            raise ValueError(f"catalog_files must be one of {', '.join(CATALOG_FILES)}, got {self.catalog_files!r}")
        names = ("n_products", "max_sessions", "max_query_chars", "max_request_bytes", "max_url_chars")
        for name in (*names, "max_snapshot_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.session_ttl_s <= 0:
            raise ValueError(f"session_ttl_s must be > 0, got {self.session_ttl_s}")
        if self.title_nouns not in ("auto", "fallback"):
            raise ValueError(f"title_nouns must be 'auto' or 'fallback', got {self.title_nouns!r}")


class Shop:
    """Catalog, search index, goals and scorer of one shop; shared by every request of a process.

    Args:
        catalog: the products.
        index: the catalog's search index.
        goals: the goals, in their published order.
        nouns: the title-noun extractor the reward uses.
    """

    def __init__(self, catalog: Catalog, index: SearchIndex, goals: list[dict], nouns: TitleNouns) -> None:
        if not goals:
            raise ValueError(
                f"catalog {catalog.source!r} yields no goals; it needs products with instruction attributes"
            )
        self.catalog = catalog
        self.index = index
        self.goals = goals
        self.nouns = nouns
        self.search = functools.lru_cache(maxsize=4096)(self._search)

    @classmethod
    def from_config(cls, config: ShopConfig) -> Shop:
        """Loads or generates the catalog, loads (or builds and caches) its index, and makes the goals."""
        catalog = load_catalog(
            config.catalog, n_products=config.n_products, seed=config.seed, files=config.catalog_files,
            human_goals=config.human_goals,
        )  # fmt: skip
        index = SearchIndex.for_catalog(catalog, config.cache_dir)
        goals = read_goals(config.goals_file) if config.goals_file else build_goals(catalog, config.seed)
        nouns = TitleNouns(False if config.title_nouns == "fallback" else None)
        return cls(catalog, index, goals, nouns)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of the catalog (asins, titles, prices, options) and goals, computed on first use.

        Two shops share it when they serve the same products for the same goals; a session
        snapshot (:mod:`webshop_server.snapshots`) restores only on a shop with its fingerprint.
        """
        digest = hashlib.blake2b(digest_size=8)
        for product in self.catalog.products:
            asin = product["asin"]
            parts = (asin, product["Title"], repr(self.catalog.prices[asin]), repr(product["options"]))
            digest.update("\x1f".join(parts).encode() + b"\x1e")
        for goal in self.goals:
            digest.update(f"{goal['asin']}\x1f{goal['instruction_text']}\x1e".encode())
        return digest.hexdigest()

    def _search(self, keywords: tuple[str, ...]) -> tuple[dict, ...]:
        """The top products for a keyword list (cached: paging through results searches once)."""
        positions = self.index.search(" ".join(keywords), k=SEARCH_RETURN_N)
        return tuple(self.catalog.products[i] for i in positions)

    def score(self, goal: dict, asin: str, options: dict[str, str]) -> tuple[float, dict]:
        """The task score of buying product ``asin`` with ``options`` for ``goal``, and its breakdown."""
        product = self.catalog.by_asin[asin]
        return score_purchase(product, goal, self.catalog.prices[asin], options, self.nouns)
