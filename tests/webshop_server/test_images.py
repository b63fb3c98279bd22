"""Product drawings: one SVG per product and colour, served by the app, following the chosen colour."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from urllib.parse import quote, quote_plus

import pytest

from webshop_server.images import PALETTE, chosen_color, color_hex, product_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_every_catalog_product_has_a_well_formed_drawing(shop):
    for product in shop.catalog.products:
        root = ET.fromstring(product_svg(product, chosen_color(product, {})))
        assert root.tag == f"{SVG}svg" and root.get("viewBox") == "0 0 300 300"
        assert root.find(f"{SVG}text").text == product["noun"][:32]


def test_colour_values_map_to_the_palette():
    assert color_hex("olive green") == PALETTE["olive green"]
    assert color_hex("Navy Blue ") == PALETTE["navy blue"]
    assert color_hex("matte space grey") == PALETTE["grey"]  # its last listed word
    assert color_hex("mystery") is None and color_hex(None) is None


def test_captions_are_escaped():
    svg = product_svg({"category": "food", "noun": '<script>alert("x")</script>'}, None)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)


def test_app_serves_the_drawing_of_the_chosen_colour(client, shop):
    product = next(p for p in shop.catalog.products if len(p["options"].get("color", ())) >= 2)
    first, second = product["options"]["color"][:2]
    images = {}
    for color in (first, second):
        response = client.get(f"/product_image/{product['asin']}?color={quote_plus(color)}")
        assert response.status_code == 200 and response.mimetype == "image/svg+xml"
        images[color] = response.get_data(as_text=True)
        assert (color_hex(color) or "#") in images[color]
    assert images[first] != images[second]
    assert client.get(f"/product_image/{product['asin']}").status_code == 200
    assert client.get(f"/product_image/{product['asin']}?color=no%20such").status_code == 404
    assert client.get("/product_image/B000000000").status_code == 404


@pytest.mark.parametrize("page", ["item_page", "done"])
def test_pages_show_the_chosen_colour(client, shop, page):
    index, goal = next((i, g) for i, g in enumerate(shop.goals) if " " in g["goal_options_by_name"].get("color", ""))
    options = quote(repr({"color": goal["goal_options_by_name"]["color"]}))
    if page == "item_page":
        url = f"/item_page/fixed_{index}/{goal['asin']}/{quote(str(['x']))}/1/{options}"
    else:
        url = f"/done/fixed_{index}/{goal['asin']}/{options}"
    html = client.get(url).get_data(as_text=True)
    src = re.search(r'<img id="product-image" src="([^"]+)"', html).group(1)
    assert src == f"/product_image/{goal['asin']}?color={quote_plus(goal['goal_options_by_name']['color'])}"


def test_pages_link_bootstrap_from_the_app_not_a_cdn(client):
    html = client.get("/fixed_0").get_data(as_text=True)
    assert '<link rel="stylesheet" href="/static/bootstrap-3.4.1.min.css">' in html
    assert "//" not in re.sub(r"<!DOCTYPE html>|http://www.w3.org", "", html.split("<body>")[0])
    css = client.get("/static/bootstrap-3.4.1.min.css")
    assert css.status_code == 200 and b"Bootstrap v3.4.1" in css.data
    css.close()
