"""Self-hosted WebShop: Flask app, catalog, BM25 search, goals and reward (no Java)."""
