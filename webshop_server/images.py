"""Product images drawn offline: an SVG per product and colour, from its category, type and colour option.

The original shows each product's Amazon photo (``MainImage``, and ``option_to_image`` for
options). This shop runs offline, so every product, of the embedded catalog or of original data,
gets a drawing instead: a silhouette of its category (a bottle for beauty, a package for food, a
shirt for fashion, a chair for furniture, a device for electronics) filled with the chosen colour,
on a tint of it, captioned with the product's type. The item page asks for the image of the
chosen colour, so the picture changes when the shopper picks another colour.
"""

from __future__ import annotations

import hashlib
import re
from xml.sax.saxutils import escape

# Colour words of the catalog's colour options (and common others), as hex. A value takes the
# colour of its whole text if listed, else of its last listed word ("olive green" -> green).
PALETTE = {
    "black": "#2b2b2b", "white": "#f4f4f2", "grey": "#8d9399", "gray": "#8d9399", "light grey": "#c4c8cc",
    "space grey": "#5c6066", "charcoal": "#44484d", "silver": "#b9bec4", "navy blue": "#1f3566", "navy": "#1f3566",
    "blue": "#2f6db5", "teal": "#1d8a8a", "green": "#4d8f46", "olive green": "#6b7a35", "olive": "#6b7a35",
    "red": "#c0392b", "burgundy": "#7a1f35", "pink": "#e58fb0", "lavender": "#a897d4", "purple": "#7b4ea3",
    "rose gold": "#c99a8c", "gold": "#c9a43a", "yellow": "#e8c22e", "mustard yellow": "#c9a227", "orange": "#e67e22",
    "beige": "#d9c7a7", "ivory": "#f2ecd8", "khaki": "#b8a77a", "brown": "#7a5233", "dark brown": "#4e3423",
    "light brown": "#a8794f", "rustic brown": "#8a5a36", "walnut": "#6b4a2f", "oak": "#b38b5d", "espresso": "#3f2a1e",
    "auburn": "#8e3b24", "ash blonde": "#cdbf9f", "honey blonde": "#d6a756", "natural black": "#2f2a28",
    "indigo": "#3b4a8a", "medium indigo": "#3f5a8f", "dark wash": "#2e3f5e", "light wash": "#8aa6c8",
    "stonewash": "#7d93ad",
}  # fmt: skip
CATEGORY_COLORS = {"beauty": "#d98ba6", "food": "#d9a441", "fashion": "#5b7aa6", "furniture": "#8a6240",
                   "electronics": "#4a4f57"}  # fmt: skip
COLOR_OPTION = re.compile(r"colou?r", re.IGNORECASE)

# Silhouettes on a 300 x 300 canvas, filled with the product colour; drawn for this project.
SHAPES = {
    "beauty": (  # a bottle with a pump cap
        '<rect x="128" y="40" width="44" height="26" rx="6" fill="#555"/>'
        '<rect x="138" y="66" width="24" height="22" fill="#777"/>'
        '<rect x="96" y="88" width="108" height="150" rx="26" fill="{fill}" stroke="{edge}" stroke-width="4"/>'
        '<rect x="112" y="138" width="76" height="52" rx="6" fill="#fff" opacity="0.75"/>'
    ),
    "food": (  # a package with a label band
        '<path d="M92 70 L208 70 L222 240 L78 240 Z" fill="{fill}" stroke="{edge}" stroke-width="4"/>'
        '<path d="M92 70 L208 70 L200 52 L100 52 Z" fill="{edge}"/>'
        '<rect x="90" y="130" width="120" height="50" fill="#fff" opacity="0.75"/>'
    ),
    "fashion": (  # a t-shirt
        '<path d="M110 52 L80 62 L38 104 L68 136 L92 116 L92 246 L208 246 L208 116 L232 136 L262 104 L220 62 '
        'L190 52 Q150 84 110 52 Z" fill="{fill}" stroke="{edge}" stroke-width="4" stroke-linejoin="round"/>'
    ),
    "furniture": (  # a chair
        '<rect x="96" y="40" width="108" height="112" rx="10" fill="{fill}" stroke="{edge}" stroke-width="4"/>'
        '<rect x="84" y="148" width="132" height="30" rx="8" fill="{fill}" stroke="{edge}" stroke-width="4"/>'
        '<rect x="94" y="178" width="12" height="70" fill="{edge}"/><rect x="194" y="178" width="12" height="70" '
        'fill="{edge}"/>'
    ),
    "electronics": (  # a device with a screen
        '<rect x="70" y="56" width="160" height="184" rx="18" fill="{fill}" stroke="{edge}" stroke-width="4"/>'
        '<rect x="86" y="74" width="128" height="130" rx="6" fill="#dfe8f1" opacity="0.9"/>'
        '<circle cx="150" cy="222" r="8" fill="{edge}"/>'
    ),
}
DEFAULT_SHAPE = SHAPES["food"]


def color_hex(value: str | None) -> str | None:
    """The hex colour a colour option value names, or ``None`` when it names none of ``PALETTE``."""
    if not value:
        return None
    value = value.lower().strip()
    if value in PALETTE:
        return PALETTE[value]
    for word in reversed(value.split()):
        if word in PALETTE:
            return PALETTE[word]
    return None


def _shade(hex_color: str, factor: float) -> str:
    """``hex_color`` mixed with white (factor > 0) or black (factor < 0) by ``abs(factor)``."""
    rgb = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if factor > 0 else 0
    mixed = [round(c + (target - c) * abs(factor)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _fallback_hex(text: str) -> str:
    """A stable mid-tone colour for a colour value not in ``PALETTE`` (from a digest of it)."""
    digest = hashlib.sha256(text.encode()).digest()
    return "#" + "".join(f"{80 + b % 120:02x}" for b in digest[:3])


def color_options(product: dict) -> list[str]:
    """The product's colour option names (``color``, ``color name``, ``colour``, ...)."""
    return [name for name in product["options"] if COLOR_OPTION.search(name)]


def default_color(product: dict) -> str | None:
    """The colour shown before one is chosen: the first value of the product's first colour option."""
    names = color_options(product)
    return product["options"][names[0]][0] if names and product["options"][names[0]] else None


def chosen_color(product: dict, options: dict[str, str]) -> str | None:
    """The colour to draw for the chosen ``options``: the chosen colour option, else the default."""
    for name in color_options(product):
        if name in options:
            return options[name]
    return default_color(product)


def _render(category: str, label: str, color: str | None) -> str:
    fill = color_hex(color) or (_fallback_hex(color) if color else CATEGORY_COLORS.get(category, "#8d9399"))
    edge = _shade(fill, -0.35)
    background = _shade(fill, 0.85)
    shape = SHAPES.get(category, DEFAULT_SHAPE).format(fill=fill, edge=edge)
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 300" width="300" height="300" role="img">'
        f'<rect width="300" height="300" rx="12" fill="{background}"/>{shape}'
        f'<text x="150" y="282" text-anchor="middle" font-family="Helvetica, Arial, sans-serif" font-size="18" '
        f'fill="#333">{escape(label[:32])}</text></svg>'
    )


def product_svg(product: dict, color: str | None) -> str:
    """The SVG image of ``product`` in ``color`` (an option value; ``None``: the category's colour).

    Args:
        product: a catalog product (its ``category``, and ``noun`` or ``query`` for the caption).
        color: the colour option value to draw, e.g. ``"navy blue"``.

    Returns:
        An SVG document (text). It is a pure function of the three: the app caches it.
    """
    label = product.get("noun") or product.get("query") or product.get("category", "")
    return _render(product.get("category", ""), str(label).strip(), color)
