"""BM25 search: relevance, the top-50 cap, and the on-disk index cache."""

from __future__ import annotations

import os

import pytest

from webshop_server.catalog import generate_catalog
from webshop_server.search import SearchIndex


def test_search_ranks_matching_products_first(shop):
    hits = shop.search(("wireless", "earbuds", "noise", "cancelling"))
    assert len(hits) == 50
    assert all(h["query"] == "wireless earbuds" for h in hits[:5])
    assert "noise cancelling" in hits[0]["Title"].lower()


def test_search_uses_stemming_and_stop_words(shop):
    index = shop.index
    assert index.tokenize("The Running Shoes") == ["run", "shoe"]
    assert index.search("the of and") == []
    assert index.search("qwertyuiop") == []
    assert index.search("shoes") == index.search("shoe")


def test_every_title_finds_its_product(shop):
    for product in shop.catalog.products[:100]:
        hits = shop.index.search(product["Title"].lower())
        assert product in [shop.catalog.products[i] for i in hits]


def test_index_is_cached_on_disk_and_reloaded(tmp_path, monkeypatch):
    catalog = generate_catalog(200, seed=3)
    first = SearchIndex.for_catalog(catalog, str(tmp_path))
    saved = os.listdir(tmp_path)
    assert len(saved) == 1 and saved[0].startswith("index-200-")

    def no_build(*args, **kwargs):
        raise AssertionError("index rebuilt although it was cached")

    monkeypatch.setattr(SearchIndex, "build", no_build)
    second = SearchIndex.for_catalog(catalog, str(tmp_path))
    assert second.search("bluetooth speaker") == first.search("bluetooth speaker")


def test_other_catalog_gets_its_own_index_and_broken_cache_is_rebuilt(tmp_path):
    SearchIndex.for_catalog(generate_catalog(100, seed=1), str(tmp_path))
    SearchIndex.for_catalog(generate_catalog(100, seed=2), str(tmp_path))
    folders = sorted(os.listdir(tmp_path))
    assert len(folders) == 2
    for name in os.listdir(tmp_path / folders[0]):
        os.remove(tmp_path / folders[0] / name)
    catalog = generate_catalog(100, seed=1)
    rebuilt = SearchIndex.for_catalog(catalog, str(tmp_path))
    assert rebuilt.search(catalog.products[0]["Title"].lower())


@pytest.mark.parametrize("k", [1, 10, 50])
def test_k_caps_results(shop, k):
    assert len(shop.index.search("black", k=k)) == k
