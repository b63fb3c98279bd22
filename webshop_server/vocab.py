"""Word lists the embedded catalog generator draws from: product types of WebShop's five categories.

Each product type gives the noun that names it, the search query a shopper would type (WebShop
products carry the query they were scraped with), the category path (``›``-separated, as on
Amazon), the attributes it can have, its option names with their possible values, and a price
range in dollars. Values are lowercase like the original's option values.
"""

# ruff: noqa: E501 - data tables: one product type per entry reads better than wrapped paths
from __future__ import annotations

from typing import NamedTuple


class ProductType(NamedTuple):
    """One kind of product the generator can make."""

    noun: str
    query: str
    path: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]


COLORS = (
    "black", "white", "navy blue", "light grey", "dark brown", "beige", "olive green", "burgundy",
    "rose gold", "silver", "pink", "red", "teal", "charcoal", "khaki", "ivory", "lavender", "mustard yellow",
)  # fmt: skip
CLOTHING_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")
FL_OZ = (
    "2 fl oz (pack of 1)",
    "4 fl oz (pack of 1)",
    "8 fl oz (pack of 1)",
    "16 fl oz (pack of 1)",
    "8 fl oz (pack of 2)",
)
SCENTS = ("lavender", "unscented", "coconut vanilla", "citrus", "eucalyptus mint", "rose", "sandalwood", "fresh linen")
FLAVORS = (
    "original", "dark chocolate", "sea salt", "honey roasted", "spicy chili", "vanilla", "strawberry",
    "peanut butter", "cinnamon", "barbecue", "matcha", "mixed berry",
)  # fmt: skip
FOOD_SIZES = ("6 count", "12 count", "24 count", "1 pound (pack of 1)", "2 pound (pack of 1)", "8 ounce (pack of 3)")

CATEGORIES: dict[str, tuple[ProductType, ...]] = {
    "beauty": (
        ProductType("shampoo", "shampoo", "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
                    ("sulfate free", "paraben free", "natural ingredients", "dry hair", "color treated hair",
                     "tea tree", "argan oil", "cruelty free"), {"size": FL_OZ, "scent": SCENTS}, (6.0, 38.0)),
        ProductType("face moisturizer", "face moisturizer", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
                    ("hyaluronic acid", "sensitive skin", "fragrance free", "fine lines", "non greasy",
                     "long lasting", "vitamin c", "dermatologist tested"), {"size": FL_OZ}, (9.0, 65.0)),
        ProductType("lipstick", "matte lipstick", "Beauty & Personal Care › Makeup › Lips › Lipstick",
                    ("long lasting", "cruelty free", "highly pigmented", "moisturizing", "vegan", "waterproof"),
                    {"color": COLORS}, (5.0, 30.0)),
        ProductType("hair dryer", "hair dryer", "Beauty & Personal Care › Hair Care › Styling Tools & Appliances › Hair Dryers",
                    ("ionic technology", "fast drying", "low noise", "lightweight", "diffuser attachment",
                     "heat protection"), {"color": COLORS[:10]}, (19.0, 120.0)),
        ProductType("nail polish set", "nail polish", "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish",
                    ("quick drying", "non toxic", "long lasting", "high gloss", "chip resistant"),
                    {"color": COLORS}, (7.0, 32.0)),
        ProductType("body wash", "body wash", "Beauty & Personal Care › Skin Care › Body › Cleansers › Body Washes",
                    ("natural ingredients", "sensitive skin", "essential oils", "paraben free", "moisturizing"),
                    {"scent": SCENTS, "size": FL_OZ}, (5.0, 28.0)),
        ProductType("makeup brush set", "makeup brushes", "Beauty & Personal Care › Tools & Accessories › Makeup Brushes & Tools",
                    ("synthetic hair", "cruelty free", "easy clean", "travel case", "soft bristles"),
                    {"color": COLORS[:12]}, (8.0, 45.0)),
        ProductType("hair extension", "hair extensions", "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories",
                    ("clip in", "natural looking", "heat resistant", "human hair", "easy to use"),
                    {"color": ("natural black", "dark brown", "light brown", "honey blonde", "ash blonde", "auburn"),
                     "size": ("14 inch", "18 inch", "22 inch")}, (15.0, 90.0)),
    ),
    "food": (
        ProductType("protein bar", "protein bars", "Grocery & Gourmet Food › Snack Foods › Bars › Protein Bars",
                    ("gluten free", "high protein", "low sugar", "non gmo", "keto friendly", "plant based"),
                    {"flavor name": FLAVORS, "size": FOOD_SIZES[:3]}, (12.0, 40.0)),
        ProductType("green tea", "green tea bags", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green Tea",
                    ("organic", "caffeine free", "non gmo", "individually wrapped", "antioxidants"),
                    {"flavor name": ("jasmine", "mint", "lemon ginger", "original", "matcha", "peach"),
                     "size": ("20 count (pack of 1)", "40 count (pack of 2)", "100 count (pack of 1)")}, (4.0, 25.0)),
        ProductType("mixed nuts", "mixed nuts", "Grocery & Gourmet Food › Snack Foods › Nuts & Seeds › Mixed Nuts",
                    ("gluten free", "low sodium", "resealable bag", "kosher", "high protein", "non gmo"),
                    {"flavor name": FLAVORS, "size": FOOD_SIZES[3:]}, (8.0, 35.0)),
        ProductType("ground coffee", "ground coffee", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
                    ("medium roast", "dark roast", "fair trade", "organic", "single origin", "low acid"),
                    {"flavor name": ("original", "french vanilla", "hazelnut", "caramel", "mocha"),
                     "size": ("12 ounce (pack of 1)", "24 ounce (pack of 1)", "12 ounce (pack of 2)")}, (7.0, 30.0)),
        ProductType("dark chocolate", "dark chocolate bar", "Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars",
                    ("sugar free", "dairy free", "fair trade", "vegan", "individually wrapped", "gluten free"),
                    {"flavor name": ("sea salt", "almond", "orange", "raspberry", "mint", "original"),
                     "size": ("3 ounce (pack of 6)", "3 ounce (pack of 12)", "1 pound (pack of 1)")}, (6.0, 45.0)),
        ProductType("pasta sauce", "pasta sauce", "Grocery & Gourmet Food › Pantry Staples › Sauces › Pasta Sauces",
                    ("no added sugar", "gluten free", "non gmo", "low sodium", "plant based", "ready to eat"),
                    {"flavor name": ("marinara", "tomato basil", "arrabbiata", "roasted garlic", "vodka"),
                     "size": ("24 ounce (pack of 1)", "24 ounce (pack of 2)", "24 ounce (pack of 6)")}, (4.0, 36.0)),
        ProductType("beef jerky", "beef jerky", "Grocery & Gourmet Food › Meat & Seafood › Jerky & Dried Meats",
                    ("high protein", "low fat", "gluten free", "grass fed", "keto friendly", "resealable bag"),
                    {"flavor name": ("original", "teriyaki", "peppered", "sweet and spicy", "barbecue"),
                     "size": ("2.85 ounce (pack of 1)", "2.85 ounce (pack of 4)", "10 ounce (pack of 1)")}, (6.0, 40.0)),
    ),
    "fashion": (
        ProductType("t-shirt", "men t shirts", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
                    ("machine wash", "cotton spandex", "short sleeve", "relaxed fit", "classic fit", "moisture wicking"),
                    {"color": COLORS, "size": CLOTHING_SIZES}, (9.0, 35.0)),
        ProductType("running shoes", "running shoes women", "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running",
                    ("non slip", "rubber sole", "lightweight", "breathable mesh", "memory foam", "arch support"),
                    {"color": COLORS[:12], "size": SHOE_SIZES}, (25.0, 130.0)),
        ProductType("dress", "summer dress women", "Clothing, Shoes & Jewelry › Women › Clothing › Dresses › Casual",
                    ("machine wash", "polyester spandex", "short sleeve", "elastic waist", "button closure", "loose fit"),
                    {"color": COLORS, "size": CLOTHING_SIZES[:6]}, (16.0, 60.0)),
        ProductType("hoodie", "pullover hoodie", "Clothing, Shoes & Jewelry › Men › Clothing › Active › Active Hoodies",
                    ("long sleeve", "drawstring closure", "machine wash", "fleece lined", "regular fit"),
                    {"color": COLORS, "size": CLOTHING_SIZES}, (18.0, 70.0)),
        ProductType("jeans", "slim fit jeans", "Clothing, Shoes & Jewelry › Men › Clothing › Jeans",
                    ("slim fit", "machine wash", "button closure", "stretch fabric", "straight leg", "high waist"),
                    {"color": ("dark wash", "light wash", "black", "stonewash", "medium indigo"),
                     "size": ("28w x 30l", "30w x 30l", "32w x 32l", "34w x 32l", "36w x 34l")}, (20.0, 80.0)),
        ProductType("sandals", "sandals women", "Clothing, Shoes & Jewelry › Women › Shoes › Sandals",
                    ("open toe", "ankle strap", "rubber sole", "arch support", "non slip", "faux leather"),
                    {"color": COLORS[:10], "size": SHOE_SIZES}, (15.0, 65.0)),
        ProductType("wool socks", "wool socks", "Clothing, Shoes & Jewelry › Men › Clothing › Socks › Casual Socks",
                    ("moisture wicking", "machine wash", "cushioned sole", "merino wool", "breathable"),
                    {"color": COLORS[:8], "size": ("medium", "large", "x-large")}, (8.0, 30.0)),
        ProductType("baseball cap", "baseball cap", "Clothing, Shoes & Jewelry › Men › Accessories › Hats & Caps › Baseball Caps",
                    ("adjustable strap", "cotton twill", "one size", "hand wash", "sun protection"),
                    {"color": COLORS}, (8.0, 28.0)),
    ),
    "furniture": (
        ProductType("office chair", "ergonomic office chair", "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs",
                    ("lumbar support", "easy assembly", "adjustable height", "high back", "breathable mesh",
                     "swivel wheels"), {"color": COLORS[:8]}, (60.0, 320.0)),
        ProductType("coffee table", "coffee table living room", "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
                    ("solid wood", "easy assembly", "storage shelf", "mid century", "metal frame", "living room"),
                    {"color": ("walnut", "oak", "black", "white", "rustic brown", "espresso")}, (45.0, 260.0)),
        ProductType("bookshelf", "bookshelf", "Home & Kitchen › Furniture › Home Office Furniture › Bookcases",
                    ("easy assembly", "solid wood", "space saving", "industrial style", "metal frame", "5 tier"),
                    {"color": ("walnut", "oak", "black", "white", "rustic brown"), "size": ("3 tier", "4 tier", "5 tier")},
                    (35.0, 210.0)),
        ProductType("bed frame", "queen bed frame", "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases",
                    ("no box spring needed", "easy assembly", "metal frame", "under bed storage", "noise free",
                     "wood slat support"), {"size": ("twin", "full", "queen", "king"), "color": ("black", "white", "grey")},
                    (90.0, 420.0)),
        ProductType("bar stool", "bar stools set of 2", "Home & Kitchen › Furniture › Kitchen & Dining Room Furniture › Stools",
                    ("counter height", "swivel seat", "faux leather", "easy assembly", "footrest", "metal frame"),
                    {"color": COLORS[:8], "size": ("set of 2", "set of 3", "set of 4")}, (55.0, 240.0)),
        ProductType("nightstand", "nightstand", "Home & Kitchen › Furniture › Bedroom Furniture › Nightstands",
                    ("storage drawer", "easy assembly", "solid wood", "charging station", "space saving"),
                    {"color": ("walnut", "oak", "black", "white", "rustic brown", "grey")}, (30.0, 150.0)),
        ProductType("sofa", "loveseat sofa", "Home & Kitchen › Furniture › Living Room Furniture › Sofas & Couches",
                    ("living room", "high density foam", "easy assembly", "solid wood legs", "velvet fabric",
                     "removable cushions"), {"color": COLORS[:10]}, (180.0, 780.0)),
    ),
    "electronics": (
        ProductType("wireless earbuds", "wireless earbuds", "Electronics › Headphones, Earbuds & Accessories › Earbuds",
                    ("noise cancelling", "bluetooth 5.3", "long battery life", "water resistant", "charging case",
                     "hands free calling"), {"color": ("black", "white", "navy blue", "rose gold")}, (19.0, 180.0)),
        ProductType("phone case", "iphone case", "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
                    ("shockproof", "slim fit", "wireless charging compatible", "raised edges", "scratch resistant"),
                    {"color": COLORS, "size": ("iphone 14", "iphone 14 pro", "iphone 15", "iphone 15 pro max")},
                    (7.0, 35.0)),
        ProductType("usb c charger", "usb c charger fast charging", "Electronics › Computers & Accessories › Chargers & Adapters",
                    ("fast charging", "foldable plug", "compact design", "overheat protection", "dual port"),
                    {"color": ("black", "white"), "size": ("20w", "30w", "45w", "65w")}, (10.0, 60.0)),
        ProductType("bluetooth speaker", "portable bluetooth speaker", "Electronics › Portable Audio & Video › Portable Speakers & Docks",
                    ("waterproof", "long battery life", "stereo sound", "deep bass", "easy to carry", "built in microphone"),
                    {"color": COLORS[:10]}, (20.0, 150.0)),
        ProductType("hdmi cable", "hdmi cable", "Electronics › Accessories & Supplies › Audio & Video Accessories › Cables › HDMI Cables",
                    ("high speed", "4k support", "gold plated", "braided nylon", "ethernet support"),
                    {"size": ("3 ft", "6 ft", "10 ft", "15 ft", "25 ft")}, (6.0, 30.0)),
        ProductType("security camera", "wifi security camera", "Electronics › Camera & Photo › Video Surveillance › Surveillance Cameras",
                    ("night vision", "motion detection", "two way audio", "easy install", "1080p hd", "cloud storage"),
                    {"size": ("1 pack", "2 pack", "4 pack")}, (25.0, 200.0)),
        ProductType("tablet stand", "tablet stand", "Electronics › Computers & Accessories › Tablet Accessories › Stands",
                    ("adjustable angle", "aluminum alloy", "non slip", "foldable", "heavy duty"),
                    {"color": ("silver", "black", "space grey", "rose gold")}, (9.0, 45.0)),
        ProductType("wireless mouse", "wireless mouse", "Electronics › Computers & Accessories › Computer Accessories & Peripherals › Mice",
                    ("ergonomic design", "silent click", "rechargeable battery", "usb receiver", "long battery life"),
                    {"color": ("black", "white", "grey", "pink", "navy blue")}, (8.0, 55.0)),
    ),
}  # fmt: skip

BRANDS: dict[str, tuple[str, ...]] = {
    "beauty": ("Lumiere", "Aveline", "PureGlow", "Botanica", "Velvetine", "Oasis Naturals", "Sorella", "Klaris"),
    "food": ("Harvest Hill", "Nutrio", "Golden Acre", "Bramble & Co", "TrailMix Kitchen", "Sunfield", "Casa Verde"),
    "fashion": ("Northpeak", "Urban Thread", "Solstice", "Marlowe", "Kestrel", "Driftwood", "Vantage Apparel"),
    "furniture": ("Oakhaven", "Nordwood", "Loftline", "Homestead Living", "Arbor & Pine", "Modulo", "Calloway"),
    "electronics": ("Voltix", "Soundcore Pro", "Lumatek", "Nexion", "Orbitron", "Zentra", "Auralink"),
}

# Words a title adds before the noun; drawn without replacement.
TITLE_ADJECTIVES = ("premium", "classic", "everyday", "deluxe", "professional", "ultra", "essential", "modern")
DESCRIPTION_OPENERS = (
    "Meet the {brand} {noun}, made for people who want {a1} without compromise.",
    "The {brand} {noun} combines {a1} and {a2} in one thoughtfully designed product.",
    "Designed in-house by {brand}, this {noun} is built around {a1}.",
    "Upgrade your routine with the {brand} {noun}: {a1}, {a2} and nothing you do not need.",
)
DESCRIPTION_BODIES = (
    "Every unit is inspected before it ships, and our support team answers questions within one business day.",
    "Customers tell us it is the {noun} they reach for first, day after day.",
    "It arrives ready to use and is backed by a 30-day satisfaction guarantee.",
    "We test each batch for quality and consistency, so the one you receive matches the one we designed.",
    "Its {a2} makes it a dependable choice for home, work or travel.",
)
BULLETS = (
    "{A1}: engineered for {a1} so it performs the way you expect.",
    "{A2} - a detail our customers mention again and again in their reviews.",
    "Thoughtful design: {brand} pairs {a1} with an easy, everyday {noun}.",
    "What you get: one {noun}, a quick start card and our friendly customer service.",
    "Great gift idea for birthdays, holidays and anyone who appreciates a quality {noun}.",
)
REVIEW_TITLES = ("Exactly as described", "Works great", "Would buy again", "Not bad for the price", "Disappointed",
                 "Love it", "Decent quality", "Better than expected")  # fmt: skip
REVIEW_BODIES = (
    "I have used this {noun} for a few weeks now and it does the job.",
    "The {a1} really shows; my old one never felt this good.",
    "Shipping was fast and the {noun} looks just like the photos.",
    "Quality could be better, but for this price I am happy.",
    "Bought a second one as a gift. Highly recommend this {noun}.",
)
INSTRUCTION_OPENERS = ("i am looking for", "i need", "i want", "i would like", "find me", "i'm looking for",
                       "can you find me", "i want to buy")  # fmt: skip

# ----------------------------------------------------------------------------------------------
# Wording of the hard embedded shop (``catalog_v1``): what shoppers call a product and its
# features when they do not copy the title.
# ----------------------------------------------------------------------------------------------

NOUN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "shampoo": ("hair shampoo", "shampoo for my hair", "hair wash"),
    "face moisturizer": ("facial moisturizer", "face cream", "moisturizing cream for my face"),
    "lipstick": ("lip color", "lip stick", "matte lip color"),
    "hair dryer": ("blow dryer", "hairdryer", "blow dryer for hair"),
    "nail polish set": ("nail polish", "nail lacquer set", "set of nail colors"),
    "body wash": ("shower gel", "body cleanser", "shower wash"),
    "makeup brush set": ("makeup brushes", "cosmetic brush set", "brush kit for makeup"),
    "hair extension": ("hair extensions", "clip on hair piece", "extensions for my hair"),
    "protein bar": ("protein bars", "snack bars with protein", "energy bars"),
    "green tea": ("green tea bags", "bagged green tea", "tea"),
    "mixed nuts": ("nut mix", "assorted nuts", "snack nuts"),
    "ground coffee": ("coffee grounds", "coffee", "pre-ground coffee"),
    "dark chocolate": ("chocolate bar", "dark chocolate bars", "cocoa bar"),
    "pasta sauce": ("marinara sauce", "spaghetti sauce", "sauce for pasta"),
    "beef jerky": ("jerky", "dried beef snack", "meat snack"),
    "t-shirt": ("tee shirt", "tee", "shirt"),
    "running shoes": ("running sneakers", "jogging shoes", "sneakers for running"),
    "dress": ("casual dress", "sundress", "summer dress"),
    "hoodie": ("hooded sweatshirt", "pullover", "sweatshirt with a hood"),
    "jeans": ("denim jeans", "denim pants", "pair of jeans"),
    "sandals": ("summer sandals", "open shoes", "pair of sandals"),
    "wool socks": ("socks", "warm socks", "pairs of wool socks"),
    "baseball cap": ("ball cap", "cap", "baseball hat"),
    "office chair": ("desk chair", "computer chair", "chair for my office"),
    "coffee table": ("center table", "living room table", "cocktail table"),
    "bookshelf": ("bookcase", "book shelf", "shelving unit for books"),
    "bed frame": ("platform bed", "bed base", "frame for my bed"),
    "bar stool": ("bar stools", "counter stool", "kitchen stool"),
    "nightstand": ("bedside table", "night table", "end table for the bedroom"),
    "sofa": ("couch", "loveseat", "small sofa"),
    "wireless earbuds": ("bluetooth earbuds", "earphones", "true wireless earbuds"),
    "phone case": ("iphone case", "phone cover", "case for my phone"),
    "usb c charger": ("usb-c charger", "wall charger", "charging adapter"),
    "bluetooth speaker": ("portable speaker", "wireless speaker", "speaker"),
    "hdmi cable": ("hdmi cord", "hdmi wire", "cable for my tv"),
    "security camera": ("surveillance camera", "home camera", "wifi camera"),
    "tablet stand": ("ipad stand", "tablet holder", "stand for my tablet"),
    "wireless mouse": ("cordless mouse", "computer mouse", "bluetooth mouse"),
}
# Whole-phrase rewordings of attributes; the rules of ``catalog_v1.paraphrase`` cover the rest.
ATTRIBUTE_PARAPHRASES: dict[str, tuple[str, ...]] = {
    "high protein": ("protein rich", "rich in protein"),
    "low sugar": ("reduced sugar", "with little sugar"),
    "machine wash": ("machine washable", "washable in the machine"),
    "lightweight": ("light weight", "light"),
    "waterproof": ("water proof",),
    "shockproof": ("shock proof",),
    "breathable": ("breathable fabric",),
    "organic": ("certified organic",),
    "vegan": ("vegan friendly",),
    "moisturizing": ("hydrating",),
    "long battery life": ("a long lasting battery", "long battery"),
    "easy assembly": ("easy to assemble", "simple assembly"),
    "easy install": ("easy to install",),
    "easy clean": ("easy to clean",),
    "noise cancelling": ("noise canceling", "active noise cancelling"),
    "fast charging": ("quick charging", "fast charge"),
    "quick drying": ("fast drying", "quick dry"),
    "fast drying": ("quick drying", "dries fast"),
    "sensitive skin": ("for sensitive skin",),
    "dry hair": ("for dry hair",),
    "color treated hair": ("for color treated hair",),
    "living room": ("for the living room",),
    "high speed": ("high-speed",),
    "4k support": ("4k capable", "supports 4k"),
}
# Item-page lines of the hard shop; ``{A}`` / ``{a}`` is one attribute, capitalised / as is.
BULLETS_V1 = (
    "{A}: engineered for everyday use, so it performs the way you expect.",
    "{A} - a detail our customers mention again and again in their reviews.",
    "Built with {a} in mind, from the first sketch to the final inspection.",
    "Why it stands out: {a}, tested batch after batch.",
    "{A} for peace of mind at home, at work or on the go.",
)
GENERIC_BULLETS_V1 = (
    "What you get: one {noun}, a quick start card and our friendly customer service.",
    "Great gift idea for birthdays, holidays and anyone who appreciates a quality {noun}.",
    "Backed by a 30-day satisfaction guarantee and a one-year limited warranty.",
)
DESCRIPTION_OPENERS_V1 = (
    "Meet the {brand} {noun}, made for people who want {a} without compromise.",
    "Designed in-house by {brand}, this {noun} is built around {a}.",
    "The {brand} {noun} is our answer to a simple request: {a}.",
    "Upgrade your routine with the {brand} {noun}, with {a} and nothing you do not need.",
)
VARIANT_SUFFIXES = ("", "", "", " - Value Edition", " (New Version)", " - Bestseller", " 2024 Model")
# Features any product of a category may have, added to its type's own in the hard shop, so that
# competing lines share fewer of a goal's features.
CATEGORY_ATTRIBUTES_V1: dict[str, tuple[str, ...]] = {
    "beauty": ("travel size", "dermatologist recommended", "gift set", "made in usa", "recyclable packaging",
               "alcohol free"),
    "food": ("kosher certified", "no artificial flavors", "family size", "made in usa", "bpa free packaging",
             "dairy free"),
    "fashion": ("wrinkle free", "quick dry", "made in usa", "recycled materials", "tagless", "stain resistant"),
    "furniture": ("tool free assembly", "weight capacity 300 lbs", "made in usa", "scratch resistant",
                  "water resistant finish", "pet friendly"),
    "electronics": ("energy efficient", "made in usa", "travel friendly", "plug and play", "lifetime warranty",
                    "low power consumption"),
}  # fmt: skip
