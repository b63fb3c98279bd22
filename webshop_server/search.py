"""BM25 product search in Python (``bm25s`` + ``PyStemmer``), the stand-in for the original's Lucene.

Documents are built as the original builds its Lucene documents (``catalog.product_document``);
tokens are lowercase words of two or more characters, English stop words removed, Snowball
(Porter 2) stemmed. A search returns the top 50 products with a positive score, best first, ties
broken by catalog order. The index is built once per catalog and cached on disk, keyed by a
digest of the documents, so later starts only load it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable

import bm25s
import numpy as np
import Stemmer

from webshop_server.catalog import Catalog

logger = logging.getLogger(__name__)

SEARCH_RETURN_N = 50
INDEX_FORMAT = "bm25s-lucene-1"  # bump when the tokenisation or scoring parameters change


def default_cache_dir() -> str:
    """``$GACA_WEBSHOP_CACHE``, else ``~/.cache/gaca/webshop``."""
    return os.environ.get("GACA_WEBSHOP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gaca", "webshop")


class SearchIndex:
    """A BM25 index over a catalog's products.

    Build one with ``SearchIndex.build`` or, cached on disk, ``SearchIndex.for_catalog``.
    """

    def __init__(self, retriever: bm25s.BM25, n_docs: int) -> None:
        self.retriever = retriever
        self.n_docs = n_docs
        self.stemmer = Stemmer.Stemmer("english")

    @classmethod
    def build(cls, documents: Iterable[str]) -> SearchIndex:
        """Indexes ``documents`` (in catalog order) in memory."""
        docs = list(documents)
        stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25()  # Lucene's BM25 variant, k1=1.5, b=0.75
        retriever.index(tokens, show_progress=False)
        return cls(retriever, len(docs))

    @classmethod
    def for_catalog(cls, catalog: Catalog, cache_dir: str | None = None) -> SearchIndex:
        """Loads the catalog's index from ``cache_dir``, building and saving it on first use.

        Args:
            catalog: the catalog to index.
            cache_dir: cache folder; ``None`` uses ``default_cache_dir()``; ``""`` disables caching.
        """
        documents = list(catalog.documents())
        if cache_dir == "":
            return cls.build(documents)
        cache_dir = cache_dir or default_cache_dir()
        digest = hashlib.sha256(f"{INDEX_FORMAT}\n{bm25s.__version__}\n".encode())
        for doc in documents:
            digest.update(doc.encode("utf-8"))
            digest.update(b"\n")
        path = os.path.join(cache_dir, f"index-{len(documents)}-{digest.hexdigest()[:24]}")
        if os.path.isdir(path):
            try:
                return cls(bm25s.BM25.load(path, show_progress=False, verbosity=0), len(documents))
            except (OSError, ValueError) as e:
                logger.warning("cached search index %s is unreadable (%s); rebuilding it", path, e)
                shutil.rmtree(path, ignore_errors=True)
        index = cls.build(documents)
        index.save(path)
        return index

    def save(self, path: str) -> None:
        """Saves the index to ``path`` atomically (another process racing to save the same index is fine)."""
        parent = os.path.dirname(path) or "."
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-index-", dir=parent)
        self.retriever.save(tmp, show_progress=False)
        try:
            os.rename(tmp, path)
        except OSError:  # another process saved it first
            shutil.rmtree(tmp, ignore_errors=True)

    def tokenize(self, query: str) -> list[str]:
        """The query's index tokens (lowercased, stop words removed, stemmed)."""
        return bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False)[0]

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Catalog positions of the top ``k`` products for ``query``, best first (only positive scores)."""
        tokens = self.tokenize(query)
        if not tokens:
            return []
        scores = self.retriever.get_scores(tokens)
        positive = int(np.count_nonzero(scores > 0))
        k = min(k, positive)
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        # Best score first; equal scores in catalog order (Lucene breaks ties by document id).
        order = np.lexsort((top, -scores[top]))
        return [int(i) for i in top[order] if scores[i] > 0][:k]
