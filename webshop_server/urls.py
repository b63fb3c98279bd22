"""The shop's URL rules, and a builder that gives the same URLs as Flask's ``url_for`` at a fraction of its cost.

A results or item page links to a dozen or more pages (products, option values, sub-pages), and
``url_for`` costs tens of microseconds a call, a large part of an env step. ``PageUrls`` fills
the same rules with the same quoting as Werkzeug (path parts quoted with
``quote(str(value), safe=PATH_SAFE)``, other values as a query string as ``urlencode`` writes
it), caching the quoted parts, and
tests/webshop_server/test_app.py checks that it equals ``url_for``.

``PageUrls.attribute`` gives the URL ready for a double-quoted HTML attribute. Quoting leaves no
``"``, ``<`` or ``>`` in a URL, so only ``&`` needs escaping there; Jinja's autoescape would
also write each ``'`` (the URLs hold Python literals: ``['red', 'shoes']``) as ``&#39;``, which
every reader of the page then decodes again: the env's parser spent about a tenth of a step on that.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

from flask import request
from markupsafe import Markup

PAGE_RULES = {
    "index": "/<session_id>",
    "search_results": "/search_results/<session_id>/<keywords>/<page>",
    "item_page": "/item_page/<session_id>/<asin>/<keywords>/<page>/<options>",
    "item_sub_page": "/item_sub_page/<session_id>/<asin>/<keywords>/<page>/<sub_page>/<options>",
    "done": "/done/<session_id>/<asin>/<options>",
    "product_image": "/product_image/<asin>",
}
PATH_SAFE = "!$&'()*+,/:;=@"  # Werkzeug's path-segment quoting
QUERY_SAFE = "!$'()*,/:;?@"  # Werkzeug's query-string quoting


class PageUrls:
    """Builds ``rules``' URLs under the current request's script root, as ``url_for`` does.

    Args:
        rules: endpoint -> rule with ``<name>`` parts (default converter only).
    """

    def __init__(self, rules: Mapping[str, str], cache_size: int = 65536) -> None:
        self.parts = {endpoint: re.split(r"<(\w+)>", rule) for endpoint, rule in rules.items()}
        # A page's links share most parts (session, asin, keywords): quoting each once is most of the saving.
        self.quote_path = functools.lru_cache(maxsize=cache_size)(functools.partial(quote, safe=PATH_SAFE))
        self.quote_query = functools.lru_cache(maxsize=cache_size)(functools.partial(quote_plus, safe=QUERY_SAFE))

    def __call__(self, endpoint: str, **values: object) -> str:
        """The URL of ``endpoint``; values not in its rule (``None`` dropped) become the query string.

        Raises:
            KeyError: for an unknown endpoint or a missing rule part.
        """
        parts = self.parts[endpoint]
        out = []
        for i, part in enumerate(parts):
            out.append(self.quote_path(str(values.pop(part))) if i % 2 else part)
        quote_query = self.quote_query
        query = "&".join(f"{quote_query(k)}={quote_query(str(v))}" for k, v in values.items() if v is not None)
        if query:
            out.append("?" + query)
        # As Werkzeug joins them: the script root without its trailing '/', then the path without leading ones.
        return f"{request.script_root.rstrip('/')}/{''.join(out).lstrip('/')}"

    def attribute(self, endpoint: str, **values: object) -> Markup:
        """The URL of ``endpoint`` escaped for a double-quoted HTML attribute (``&`` as ``&amp;``).

        Only for double-quoted attributes: a ``'`` stays as it is.
        """
        return Markup(self(endpoint, **values).replace("&", "&amp;"))
