"""WebShop environments: ``GACA-WebShop-v0`` (text, in-process or HTTP) and ``GACA-WebShop-Browser-v0``."""
