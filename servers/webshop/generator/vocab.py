"""Vocabulary of the generated catalog: product types, attributes, options and phrasing.

Everything here is plain data written for gagpo (no text is taken from the original WebShop
data). The generator (:mod:`gagpo.servers.webshop.generator.families`) draws from it.

Conventions:

* An attribute is a short lower-case phrase (``"non slip"``, ``"gluten free"``). In a type's
  ``attributes`` string a prefix tells how an instruction phrases it: ``for:dry hair`` reads
  "shampoo for dry hair", ``with:side pockets`` reads "dress with side pockets"; plain ones go
  before the noun ("a non slip ...") or after it, as "that is ..." when they read as an
  adjective (:func:`is_adjectival`) and as "with ..." otherwise.
* Product texts may spell an attribute differently (:func:`surface_variant`: "non-slip",
  "easy to clean", "side pocket"): the same search words, but not the phrase itself.
* Within one product type no attribute may be a substring of another or of another's other
  spelling, nor fuzzy-match another (token_set_ratio > 85), and no generic text of the type
  (facts, tails, title words and nouns, blurbs, intros, closers) may contain one: the reward
  counts a goal attribute that is a substring of the bought product's text, so a product that
  lacks an attribute must never name it word for word. Tests check this.
* Option values keep Amazon's capitalisation and contain no "/"; instructions use them
  lower-cased, exactly as the loader shows them. No text needs JSON escaping (no double quote
  or backslash), which lets the generator format JSON directly.
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES = ("beauty", "food", "fashion", "furniture", "electronics")
SEP = " \u203a "  # the original's product_category separator ("A › B › C")


@dataclass(frozen=True)
class OptionGroup:
    """One customization option group, e.g. ``Color`` with its possible values."""

    name: str
    kind: str
    """How an instruction phrases a value: color, size, flavor, scent, count, style, device."""
    values: tuple[str, ...]
    images: bool = False
    """Whether the values come with a swatch image (colours, styles) or not (sizes)."""


@dataclass(frozen=True)
class Query:
    """A search query that "found" products, with its audience and product_category path."""

    text: str
    audience: str
    """Either "men", "women" or "" (gives "Men's ..." titles, "... for men" instructions)."""
    path: str


@dataclass(frozen=True)
class ProductType:
    """A kind of product (running shoes, coffee ...): what its listings are made of."""

    category: str
    nouns: tuple[str, ...]
    """Lower-case nouns an instruction may use; the first is the main one."""
    title_nouns: tuple[str, ...]
    queries: tuple[Query, ...]
    attributes: tuple[str, ...]
    options: tuple[OptionGroup, ...]
    price: tuple[float, float]
    words: tuple[str, ...]
    """Title-case selling words for titles (never an attribute)."""
    tails: tuple[str, ...]
    """Title endings ("for Gym Jogging Walking")."""
    facts: tuple[str, ...]
    """Plain sentences for descriptions and bullets (never an attribute)."""
    plural: bool = False
    """Instructions ask for "some jeans" rather than "a jeans"."""
    pair: bool = False
    """Instructions may ask for "a pair of" them."""


def _group(name: str, kind: str, values: str, images: bool = False) -> OptionGroup:
    return OptionGroup(name, kind, tuple(v.strip() for v in values.split("|")), images)


def _q(*entries: tuple[str, str, str]) -> tuple[Query, ...]:
    return tuple(
        Query(text, audience, SEP.join(path.split(" > "))) for text, audience, path in entries
    )


def _split(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(";") if s.strip())


def attribute_phrase(entry: str) -> tuple[str, str]:
    """``"for:dry hair"`` -> ``("dry hair", "for")``; plain entries are ``("...", "pre")``."""
    kind, sep, phrase = entry.partition(":")
    return (phrase, kind) if sep else (entry, "pre")


# --- option groups --------------------------------------------------------------------------

APPAREL_COLORS = _group(
    "Color",
    "color",
    "Black|White|Navy Blue|Heather Grey|Charcoal|Olive Green|Burgundy|Royal Blue|Red|Khaki|"
    "Light Blue|Dark Green|Maroon|Pink|Beige|Mustard Yellow",
    images=True,
)
DRESS_COLORS = _group(
    "Color",
    "color",
    "Black|Floral Blue|Wine Red|Sage Green|Apricot|Dusty Pink|Navy Blue|Leopard|White|"
    "Lavender|Floral Yellow|Rust",
    images=True,
)
DENIM_COLORS = _group(
    "Color",
    "color",
    "Dark Wash|Medium Wash|Light Wash|Black|Stone Wash|Indigo|Vintage Blue|Grey",
    images=True,
)
SHOE_COLORS = _group(
    "Color",
    "color",
    "Black White|All Black|Grey|Navy|White|Blue Orange|Red|Olive|Beige|Pink|Charcoal Green",
    images=True,
)
BOOT_COLORS = _group(
    "Color", "color", "Black|Brown|Tan|Dark Brown|Chestnut|Grey|Taupe|Wheat|Burgundy", images=True
)
APPAREL_SIZES = _group("Size", "size", "X-Small|Small|Medium|Large|X-Large|XX-Large|3X-Large")
SHOE_SIZES = _group("Size", "size", "6|6.5|7|7.5|8|8.5|9|9.5|10|10.5|11|11.5|12|13")
JEANS_SIZES = _group(
    "Size",
    "size",
    "28W x 30L|30W x 30L|30W x 32L|32W x 30L|32W x 32L|34W x 30L|34W x 32L|36W x 32L|38W x 32L",
)
SOCK_SIZES = _group("Size", "count", "Shoe Size 5-9|Shoe Size 6-12|Shoe Size 9-12|Shoe Size 12-15")
SOCK_PACKS = _group("Item Package Quantity", "count", "3 Pairs|6 Pairs|10 Pairs|12 Pairs")
BAG_COLORS = _group(
    "Color",
    "color",
    "Black|Brown|Beige|Burgundy|Grey|Khaki|Dark Green|Cream|Pink|Navy",
    images=True,
)
WATCH_COLORS = _group(
    "Color",
    "color",
    "Silver Black|Gold|Rose Gold|All Black|Silver Blue|Brown Leather|Gold Green|Silver White",
    images=True,
)

COFFEE_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Medium Roast|Dark Roast|Light Roast|French Roast|Breakfast Blend|Colombian|Hazelnut|"
    "French Vanilla|Espresso Roast|Decaf House Blend",
)
COFFEE_SIZES = _group(
    "Size",
    "count",
    "10 Ounce (Pack of 1)|12 Ounce (Pack of 1)|12 Ounce (Pack of 2)|12 Ounce (Pack of 3)|"
    "2 Pound (Pack of 1)|32 Ounce (Pack of 1)",
)
TEA_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Green Tea|Chamomile|Earl Grey|Peppermint|English Breakfast|Jasmine|Lemon Ginger|Hibiscus|"
    "Rooibos|Chai Spice",
)
TEA_SIZES = _group(
    "Size",
    "count",
    "20 Count (Pack of 1)|20 Count (Pack of 3)|20 Count (Pack of 6)|40 Count (Pack of 2)|"
    "100 Count (Pack of 1)",
)
CHIP_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Sea Salt|Barbecue|Sour Cream & Onion|Jalapeno|Salt & Vinegar|Cheddar|Chili Lime|"
    "Cracked Pepper|Original",
)
CHIP_SIZES = _group(
    "Size",
    "count",
    "1 Ounce (Pack of 24)|1.5 Ounce (Pack of 12)|5 Ounce (Pack of 6)|8 Ounce (Pack of 3)|"
    "7.5 Ounce (Pack of 1)",
)
JERKY_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Original|Teriyaki|Peppered|Sweet & Spicy|Hickory Smoked|Sriracha|Honey Bourbon|Garlic Pepper",
)
JERKY_SIZES = _group(
    "Size",
    "count",
    "1 Ounce (Pack of 12)|2.85 Ounce (Pack of 4)|3.25 Ounce (Pack of 1)|10 Ounce (Pack of 1)|"
    "16 Ounce (Pack of 1)",
)
BAR_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Chocolate Chip|Peanut Butter|Cookies & Cream|Birthday Cake|Salted Caramel|"
    "Chocolate Brownie|Blueberry Muffin|Almond Butter",
)
BAR_SIZES = _group(
    "Size", "count", "4 Count (Pack of 1)|12 Count (Pack of 1)|15 Count (Pack of 1)|24 Count"
)
CHOCOLATE_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Milk Chocolate|Dark Chocolate|Caramel|Sea Salt Caramel|Assorted|Mint|Hazelnut Praline|"
    "Raspberry",
)
CHOCOLATE_SIZES = _group(
    "Size", "count", "Pack of 6|Pack of 12|24 Count|1 Pound|2 Pound|8 Ounce (Pack of 1)"
)
NUT_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Lightly Salted|Unsalted|Honey Roasted|Sea Salt|Smoked|Chili Lime|Cinnamon",
)
NUT_SIZES = _group(
    "Size",
    "count",
    "1 Ounce (Pack of 24)|8 Ounce (Pack of 1)|16 Ounce (Pack of 1)|2 Pound (Pack of 1)|"
    "3 Pound (Pack of 1)",
)
SEASONING_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Garlic Herb|Lemon Pepper|Cajun|Smoky Barbecue|Italian Herb|Taco|Everything Bagel|Steak",
)
SEASONING_SIZES = _group(
    "Size", "count", "2.5 Ounce (Pack of 1)|4 Ounce (Pack of 1)|6 Ounce (Pack of 2)|11 Ounce"
)
WATER_FLAVORS = _group(
    "Flavor Name",
    "flavor",
    "Lime|Black Cherry|Grapefruit|Lemon|Mango|Watermelon|Peach|Raspberry Lime|Pure",
)
WATER_SIZES = _group(
    "Size",
    "count",
    "12 Fl Oz (Pack of 8)|12 Fl Oz (Pack of 12)|16.9 Fl Oz (Pack of 12)|12 Fl Oz (Pack of 24)",
)

HAIR_SCENTS = _group(
    "Scent", "scent", "Coconut|Lavender|Tea Tree|Citrus|Unscented|Rosemary Mint|Vanilla|Eucalyptus"
)
HAIR_SIZES = _group(
    "Size",
    "count",
    "8 Fl Oz (Pack of 1)|12 Fl Oz (Pack of 1)|16 Fl Oz (Pack of 1)|12 Fl Oz (Pack of 2)|"
    "33.8 Fl Oz (Pack of 1)",
)
LIP_COLORS = _group(
    "Color",
    "color",
    "Ruby Red|Nude Pink|Berry|Coral|Mauve|Classic Red|Plum|Rose|Brick Red|Peach|Wine",
    images=True,
)
SERUM_SIZES = _group(
    "Size", "count", "0.5 Fl Oz (Pack of 1)|1 Fl Oz (Pack of 1)|1 Fl Oz (Pack of 2)|2 Fl Oz"
)
LOTION_SCENTS = _group(
    "Scent", "scent", "Unscented|Cocoa Butter|Lavender|Coconut|Oatmeal|Cucumber|Vanilla|Aloe"
)
LOTION_SIZES = _group(
    "Size", "count", "8 Fl Oz (Pack of 1)|13.5 Fl Oz (Pack of 1)|16 Fl Oz (Pack of 2)|32 Fl Oz"
)
NAIL_COLORS = _group(
    "Color",
    "color",
    "Cherry Red|Soft Pink|Navy|Nude|Lilac|Mint Green|Black|Coral|Gold Glitter|Burgundy|Sky Blue",
    images=True,
)
TOOL_COLORS = _group("Color", "color", "Black|Rose Gold|Pink|Purple|White|Teal", images=True)
IRON_SIZES = _group("Size", "size", "1 Inch|1.25 Inch|1.5 Inch|2 Inch")
DEODORANT_SCENTS = _group(
    "Scent", "scent", "Unscented|Lavender|Cedar|Coconut|Eucalyptus|Citrus|Rose|Sandalwood"
)
DEODORANT_SIZES = _group(
    "Size", "count", "2.65 Ounce (Pack of 1)|2.65 Ounce (Pack of 2)|2.65 Ounce (Pack of 3)|3 Ounce"
)
BRUSH_STYLES = _group("Style", "style", "5 Piece Set|10 Piece Set|14 Piece Set|16 Piece Set")
BRUSH_COLORS = _group(
    "Color", "color", "Rose Gold|Black|Pink Marble|White Gold|Champagne", images=True
)
SPF_STYLES = _group("Style", "style", "SPF 30|SPF 45|SPF 50|SPF 70")
SUN_SIZES = _group(
    "Size", "count", "3 Fl Oz (Pack of 1)|5 Fl Oz (Pack of 1)|6 Fl Oz (Pack of 2)|8 Fl Oz"
)

FURNITURE_COLORS = _group(
    "Color",
    "color",
    "Black|White|Rustic Brown|Walnut|Grey|Espresso|Natural Oak|Vintage Brown|Grey Oak",
    images=True,
)
CHAIR_COLORS = _group("Color", "color", "Black|Grey|White|Blue|Pink|Brown|Green", images=True)
CHAIR_STYLES = _group(
    "Style", "style", "Mesh|Leather|With Footrest|Without Footrest|Fabric", images=True
)
DESK_SIZES = _group("Size", "size", "32 Inch|40 Inch|47 Inch|55 Inch|63 Inch")
SHELF_SIZES = _group("Size", "size", "3-Tier|4-Tier|5-Tier|6-Tier")
SOFA_COLORS = _group(
    "Color",
    "color",
    "Dark Grey|Light Grey|Navy Blue|Beige|Emerald Green|Mustard|Cream|Brown|Pink",
    images=True,
)
SOFA_MATERIALS = _group(
    "Material Type", "material", "Velvet|Linen|Faux Leather|Boucle|Chenille", images=True
)
BED_SIZES = _group("Size", "size", "Twin|Full|Queen|King|California King")
STOOL_SETS = _group("Size", "count", "Set of 2|Set of 3|Set of 4")
TV_SIZES = _group("Size", "size", "43 Inch|55 Inch|65 Inch|70 Inch|75 Inch")
STAND_SETS = _group("Size", "count", "Set of 1|Set of 2")

GADGET_COLORS = _group(
    "Color", "color", "Black|White|Navy Blue|Grey|Rose Gold|Green|Purple|Red|Silver", images=True
)
PHONE_MODELS = _group(
    "Size",
    "device",
    "iPhone 15|iPhone 15 Pro|iPhone 15 Pro Max|iPhone 14|iPhone 13|Galaxy S24|Galaxy S23|Pixel 8",
)
CASE_COLORS = _group(
    "Color",
    "color",
    "Clear|Black|Midnight Blue|Pink|Lavender|Dark Green|Red|Clear Glitter|Sierra Blue",
    images=True,
)
CABLE_LENGTHS = _group("Size", "size", "1 ft|3 ft|6 ft|10 ft")
CABLE_STYLES = _group(
    "Style", "style", "USB C to USB C|USB A to USB C|USB C to Lightning|USB A to Lightning"
)
CABLE_PACKS = _group("Item Package Quantity", "count", "1 Pack|2 Pack|3 Pack|5 Pack")
CHARGER_STYLES = _group("Style", "style", "20W|30W|45W|65W|100W")
MONITOR_SIZES = _group("Size", "size", "22 Inch|24 Inch|27 Inch|32 Inch|34 Inch")
KEYBOARD_STYLES = _group("Style", "style", "Full Size|Compact|Tenkeyless|With Mouse", images=True)
WATCH_SIZES = _group("Size", "size", "40mm|41mm|44mm|45mm")
PROTECTOR_MODELS = _group(
    "Size",
    "device",
    "iPhone 15|iPhone 15 Pro|iPhone 14|Galaxy S24|Galaxy S23|Pixel 8|iPad 10th Gen",
)
PROTECTOR_PACKS = _group("Item Package Quantity", "count", "2 Pack|3 Pack|4 Pack")

# --- product types --------------------------------------------------------------------------

_CLOTHING = "Clothing, Shoes & Jewelry"
_FOOD = "Grocery & Gourmet Food"
_BEAUTY = "Beauty & Personal Care"
_HOME = "Home & Kitchen > Furniture"

FASHION = (
    ProductType(
        "fashion",
        ("t-shirt", "tee shirt"),
        ("T-Shirt", "Tee Shirt", "Casual Tee", "Basic Tee"),
        _q(
            ("men's t-shirts", "men", f"{_CLOTHING} > Men > Clothing > Shirts > T-Shirts"),
            (
                "women's t-shirts",
                "women",
                f"{_CLOTHING} > Women > Clothing > Tops, Tees & Blouses > T-Shirts",
            ),
        ),
        _split(
            "machine wash; short sleeve; moisture wicking; slim fit; relaxed fit; crew neck; "
            "v neck; quick drying; cotton blend; tagless collar; tumble dry; with:chest pocket"
        ),
        (APPAREL_COLORS, APPAREL_SIZES),
        (8, 35),
        ("Soft", "Classic", "Everyday", "Casual", "Premium", "Basic", "Summer"),
        ("Workout Gym Top", "Plain Tops", "Athletic Shirts", "Daily Tee", "Lounge Shirt"),
        (
            "The fabric stays soft wash after wash.",
            "A clean, simple cut pairs well with jeans, shorts or joggers.",
            "Please check the size chart before ordering.",
            "Colors may vary slightly from the photos due to screen settings.",
        ),
    ),
    ProductType(
        "fashion",
        ("dress", "summer dress"),
        ("Dress", "Midi Dress", "Sundress", "Casual Dress", "Swing Dress"),
        _q(("women's dresses", "women", f"{_CLOTHING} > Women > Clothing > Dresses > Casual")),
        _split(
            "machine wash; elastic waist; floral print; with:side pockets; knee length; v neck; "
            "high waist; polyester spandex; ruffle sleeve; tie waist; button front; "
            "for:beach vacation"
        ),
        (DRESS_COLORS, APPAREL_SIZES),
        (20, 60),
        ("Flowy", "Boho", "Elegant", "Summer", "Casual", "Loose", "Vintage"),
        ("for Party Wedding Guest", "Cocktail Party Outfit", "Spring Fall Outfit", "Beachwear"),
        (
            "The airy fabric drapes nicely and moves with you.",
            "Dress it up with heels or down with sandals.",
            "Model is 5 ft 8 in and wears a size small.",
            "A versatile piece for brunch, travel and date nights.",
        ),
    ),
    ProductType(
        "fashion",
        ("jeans", "denim jeans"),
        ("Jeans", "Denim Jeans", "Stretch Jeans", "Classic Jeans"),
        _q(
            ("men's jeans", "men", f"{_CLOTHING} > Men > Clothing > Jeans"),
            ("women's jeans", "women", f"{_CLOTHING} > Women > Clothing > Jeans"),
        ),
        _split(
            "straight leg; stretch fabric; button closure; machine wash; slim fit; high waist; "
            "relaxed fit; five pocket; zipper fly; wide leg; ripped knee; bootcut"
        ),
        (DENIM_COLORS, JEANS_SIZES),
        (25, 70),
        ("Classic", "Vintage", "Everyday", "Modern", "Washed", "Comfort"),
        ("Denim Pants", "Casual Denim Trousers", "Workwear Jeans", "Comfy Denim"),
        (
            "Made from sturdy denim that softens with every wear.",
            "The rise sits comfortably at the waist.",
            "Wash inside out in cold water to keep the color.",
            "A wardrobe staple that works for weekdays and weekends.",
        ),
        plural=True,
        pair=True,
    ),
    ProductType(
        "fashion",
        ("running shoes", "sneakers", "athletic shoes"),
        ("Running Shoes", "Sneakers", "Athletic Shoes", "Walking Shoes", "Tennis Shoes"),
        _q(
            (
                "men's running shoes",
                "men",
                f"{_CLOTHING} > Men > Shoes > Athletic > Running > Road Running",
            ),
            (
                "women's running shoes",
                "women",
                f"{_CLOTHING} > Women > Shoes > Athletic > Running > Road Running",
            ),
            ("men's sneakers", "men", f"{_CLOTHING} > Men > Shoes > Fashion Sneakers"),
        ),
        _split(
            "non slip; rubber sole; lace up; breathable mesh; arch support; memory foam; "
            "shock absorbing; wide toe box; with:removable insole; knit upper; "
            "with:reflective details; for:plantar fasciitis"
        ),
        (SHOE_COLORS, SHOE_SIZES),
        (30, 130),
        ("Lightweight", "Fashion", "Sport", "Casual", "Comfortable", "Cushioned"),
        ("for Gym Jogging Walking", "Road Running Trainers", "Tennis Workout Sneakers"),
        (
            "A grippy outsole handles pavement, treadmills and light trails.",
            "Fits true to size; order half a size up if between sizes.",
            "The padded collar and tongue keep the heel comfortable.",
            "Great for running, walking, training and travel.",
        ),
        plural=True,
        pair=True,
    ),
    ProductType(
        "fashion",
        ("boots", "ankle boots"),
        ("Boots", "Ankle Boots", "Chelsea Boots", "Work Boots", "Winter Boots"),
        _q(
            ("men's boots", "men", f"{_CLOTHING} > Men > Shoes > Boots"),
            ("women's boots", "women", f"{_CLOTHING} > Women > Shoes > Boots > Ankle & Bootie"),
        ),
        _split(
            "waterproof; rubber sole; faux fur; side zipper; steel toe; lace up; non slip; "
            "leather upper; block heel; warm lining; pull on; slip resistant outsole"
        ),
        (BOOT_COLORS, SHOE_SIZES),
        (35, 150),
        ("Classic", "Rugged", "Fashion", "Outdoor", "Retro", "Western"),
        ("for Hiking Work Outdoor", "Fall Winter Booties", "Casual Short Booties"),
        (
            "Built to handle muddy trails, city streets and snowy sidewalks.",
            "The shaft measures about six inches from the arch.",
            "A cushioned footbed keeps long days comfortable.",
            "Wipe clean with a damp cloth.",
        ),
        plural=True,
        pair=True,
    ),
    ProductType(
        "fashion",
        ("hoodie", "hooded sweatshirt"),
        ("Hoodie", "Hooded Sweatshirt", "Pullover Hoodie", "Sweatshirt"),
        _q(
            ("men's hoodies", "men", f"{_CLOTHING} > Men > Clothing > Active > Active Hoodies"),
            (
                "women's hoodies",
                "women",
                f"{_CLOTHING} > Women > Clothing > Fashion Hoodies & Sweatshirts",
            ),
        ),
        _split(
            "fleece lined; with:drawstring hood; with:kangaroo pocket; machine wash; long sleeve; "
            "zip up; relaxed fit; cotton blend; with:ribbed cuffs; oversized fit; "
            "with:thumb holes; heavyweight fabric"
        ),
        (APPAREL_COLORS, APPAREL_SIZES),
        (18, 55),
        ("Cozy", "Casual", "Athletic", "Basic", "Warm", "Soft"),
        ("Fall Winter Tops", "Workout Sweatshirts", "Loungewear Top", "Casual Jacket"),
        (
            "A cozy layer for chilly mornings and late nights.",
            "Pairs well with joggers, leggings or jeans.",
            "The brushed inside feels warm without being bulky.",
            "Please allow 1-2 cm differences due to manual measurement.",
        ),
    ),
    ProductType(
        "fashion",
        ("socks", "athletic socks"),
        ("Socks", "Athletic Socks", "Crew Socks", "Ankle Socks", "Running Socks"),
        _q(
            ("men's socks", "men", f"{_CLOTHING} > Men > Clothing > Socks > Athletic Socks"),
            ("women's socks", "women", f"{_CLOTHING} > Women > Clothing > Socks & Hosiery"),
        ),
        _split(
            "moisture wicking; cushioned sole; arch support; machine wash; no show; "
            "compression fit; odor control; reinforced heel; seamless toe; bamboo fiber"
        ),
        (APPAREL_COLORS, SOCK_SIZES, SOCK_PACKS),
        (8, 30),
        ("Athletic", "Performance", "Everyday", "Casual", "Sport", "Comfort"),
        ("for Running Hiking Training", "Multipack", "Low Cut Socks", "Work Socks"),
        (
            "Each pair keeps its shape after many washes.",
            "A snug band keeps them from slipping down.",
            "Sold as a multipack so you always have a fresh pair.",
        ),
        plural=True,
        pair=True,
    ),
    ProductType(
        "fashion",
        ("handbag", "shoulder bag", "tote bag"),
        ("Handbag", "Shoulder Bag", "Tote Bag", "Crossbody Bag", "Purse"),
        _q(
            (
                "women's handbags",
                "women",
                f"{_CLOTHING} > Women > Handbags & Wallets > Shoulder Bags",
            ),
            ("tote bags", "women", f"{_CLOTHING} > Women > Handbags & Wallets > Totes"),
        ),
        _split(
            "vegan leather; adjustable strap; zipper closure; large capacity; multiple pockets; "
            "water resistant; top handle; gold hardware; with:laptop sleeve; magnetic snap"
        ),
        (BAG_COLORS,),
        (20, 90),
        ("Fashion", "Elegant", "Classic", "Casual", "Designer", "Minimalist"),
        ("for Work Travel Shopping", "Satchel Purse", "Hobo Bag", "Shoulder Satchel"),
        (
            "Roomy enough for a tablet, wallet, phone and keys.",
            "A structured shape that stays neat all day.",
            "Comes with a dust bag for storage.",
        ),
    ),
    ProductType(
        "fashion",
        ("watch", "wrist watch"),
        ("Watch", "Wrist Watch", "Analog Watch", "Dress Watch", "Sport Watch"),
        _q(
            ("men's watches", "men", f"{_CLOTHING} > Men > Watches > Wrist Watches"),
            ("women's watches", "women", f"{_CLOTHING} > Women > Watches > Wrist Watches"),
        ),
        _split(
            "water resistant; stainless steel; quartz movement; analog display; leather band; "
            "date window; luminous hands; scratch resistant; with:gift box; minimalist dial"
        ),
        (WATCH_COLORS,),
        (25, 220),
        ("Classic", "Fashion", "Business", "Casual", "Luxury", "Elegant"),
        ("for Men Women Gift", "Dress Wristwatch", "Business Casual Watch"),
        (
            "The case is 40 mm wide and 10 mm thin.",
            "A timeless look for the office or a night out.",
            "Includes a one-year movement warranty.",
        ),
    ),
)

FOOD = (
    ProductType(
        "food",
        ("coffee", "ground coffee", "coffee beans"),
        ("Ground Coffee", "Whole Bean Coffee", "Coffee", "Coffee Beans"),
        _q(
            (
                "ground coffee",
                "",
                f"{_FOOD} > Beverages > Coffee, Tea & Cocoa > Coffee > Ground Coffee",
            ),
            (
                "whole bean coffee",
                "",
                f"{_FOOD} > Beverages > Coffee, Tea & Cocoa > Coffee > Whole Coffee Beans",
            ),
        ),
        _split(
            "gluten free; non gmo; usda organic; fair trade; single origin; low acid; "
            "kosher certified; small batch; arabica beans; nitrogen flushed; resealable bag"
        ),
        (COFFEE_FLAVORS, COFFEE_SIZES),
        (8, 38),
        ("Premium", "Smooth", "Rich", "Bold", "Gourmet", "Signature"),
        ("Bag", "Coffee Bag", "Roasted Coffee", "Fresh Roast"),
        (
            "Roasted in small lots and packed within hours.",
            "Brew it in a drip machine, a french press or a pour over.",
            "Notes of cocoa and toasted nuts with a clean finish.",
            "Store in a cool, dry place away from sunlight.",
        ),
        plural=True,
    ),
    ProductType(
        "food",
        ("tea", "herbal tea", "tea bags"),
        ("Tea Bags", "Herbal Tea", "Tea", "Loose Leaf Tea"),
        _q(
            ("tea", "", f"{_FOOD} > Beverages > Coffee, Tea & Cocoa > Tea > Herbal"),
            ("green tea", "", f"{_FOOD} > Beverages > Coffee, Tea & Cocoa > Tea > Green"),
        ),
        _split(
            "caffeine free; usda organic; non gmo; gluten free; individually wrapped; "
            "kosher certified; natural ingredients; plastic free; fair trade; compostable bags"
        ),
        (TEA_FLAVORS, TEA_SIZES),
        (4, 28),
        ("Soothing", "Premium", "Classic", "Calming", "Pure", "Gourmet"),
        ("Tea Bag Variety", "Herbal Infusion", "Hot or Iced Tea"),
        (
            "Steep one bag in hot water for three to five minutes.",
            "Delicious hot or poured over ice.",
            "Blended from carefully selected leaves and botanicals.",
        ),
        plural=True,
    ),
    ProductType(
        "food",
        ("potato chips", "chips", "snack chips"),
        ("Potato Chips", "Kettle Chips", "Tortilla Chips", "Chips"),
        _q(
            ("potato chips", "", f"{_FOOD} > Snack Foods > Chips & Crisps > Potato"),
            ("tortilla chips", "", f"{_FOOD} > Snack Foods > Chips & Crisps > Tortilla"),
        ),
        _split(
            "gluten free; non gmo; low calorie; kettle cooked; vegan friendly; nut free; "
            "whole grain; low sodium; plant based; avocado oil"
        ),
        (CHIP_FLAVORS, CHIP_SIZES),
        (4, 30),
        ("Crunchy", "Crispy", "Classic", "Thick Cut", "Snack Size", "Family Size"),
        ("Snack Bags", "Variety Pack", "Party Snacks", "Lunchbox Snacks"),
        (
            "Thick, crunchy slices seasoned all the way to the edge.",
            "A tasty pick for lunch boxes, parties and road trips.",
            "Made in small batches for a satisfying crunch.",
        ),
        plural=True,
    ),
    ProductType(
        "food",
        ("beef jerky", "jerky"),
        ("Beef Jerky", "Jerky", "Meat Snack", "Beef Sticks"),
        _q(
            ("beef jerky", "", f"{_FOOD} > Snack Foods > Jerky & Dried Meats > Beef"),
            ("meat snacks", "", f"{_FOOD} > Snack Foods > Jerky & Dried Meats > Meat Sticks"),
        ),
        _split(
            "high protein; low fat; gluten free; keto friendly; grass fed; msg free; "
            "resealable bag; low sugar; nitrate free; small batch"
        ),
        (JERKY_FLAVORS, JERKY_SIZES),
        (7, 40),
        ("Tender", "Premium", "Classic", "Smoked", "Thick Cut", "Original Recipe"),
        ("Protein Snack", "Meat Snacks", "Travel Snack", "Camping Snack"),
        (
            "Slow smoked over hardwood for a deep flavor.",
            "A handy snack for hiking, work and travel.",
            "Each bag is packed with tender, hand-trimmed pieces.",
        ),
    ),
    ProductType(
        "food",
        ("protein bars", "snack bars"),
        ("Protein Bars", "Protein Bar", "Snack Bars", "Energy Bars"),
        _q(
            ("protein bars", "", f"{_FOOD} > Snack Foods > Bars > Protein"),
            ("snack bars", "", f"{_FOOD} > Snack Foods > Bars > Nut & Seed"),
        ),
        _split(
            "high protein; low sugar; gluten free; keto friendly; plant based; "
            "individually wrapped; soy free; dairy free; non gmo; low carb; high fiber"
        ),
        (BAR_FLAVORS, BAR_SIZES),
        (12, 42),
        ("Chewy", "Delicious", "Healthy", "Crunchy", "Soft Baked", "Meal Replacement"),
        ("Healthy Snacks", "Post Workout Snack", "On the Go Snack", "Variety Pack"),
        (
            "A satisfying snack between meetings or after a workout.",
            "Tastes like a treat without the sugar rush.",
            "Toss one in your bag for busy days.",
        ),
        plural=True,
    ),
    ProductType(
        "food",
        ("chocolate", "chocolate candy"),
        ("Chocolate", "Chocolate Candy", "Chocolate Bars", "Truffles", "Chocolate Squares"),
        _q(
            ("chocolate candy", "", f"{_FOOD} > Candy & Chocolate > Chocolate > Bars"),
            ("chocolate gift", "", f"{_FOOD} > Candy & Chocolate > Chocolate > Assortments"),
        ),
        _split(
            "individually wrapped; kosher certified; nut free; sugar free; fair trade; "
            "gluten free; non gmo; with:gift box; single serve; real cocoa butter"
        ),
        (CHOCOLATE_FLAVORS, CHOCOLATE_SIZES),
        (6, 45),
        ("Gourmet", "Luxury", "Creamy", "Premium", "Classic", "Assorted"),
        ("Holiday Gift", "Candy Assortment", "Party Favors", "Sweet Treats"),
        (
            "Smooth, velvety chocolate that melts on your tongue.",
            "A sweet gift for birthdays, holidays and thank-yous.",
            "Keep in a cool place; may soften in warm weather.",
        ),
    ),
    ProductType(
        "food",
        ("mixed nuts", "trail mix", "nuts"),
        ("Mixed Nuts", "Deluxe Mixed Nuts", "Trail Mix", "Roasted Nuts", "Nut Mix"),
        _q(
            ("mixed nuts", "", f"{_FOOD} > Snack Foods > Nuts & Seeds > Mixed Nuts"),
            ("trail mix", "", f"{_FOOD} > Snack Foods > Trail Mix"),
        ),
        _split(
            "non gmo; resealable bag; high protein; low sodium; kosher certified; vegan friendly; "
            "dry roasted; gluten free; keto friendly; no added sugar; heart healthy"
        ),
        (NUT_FLAVORS, NUT_SIZES),
        (6, 38),
        ("Premium", "Deluxe", "Crunchy", "Whole", "Jumbo", "Classic"),
        ("Snack Pack", "Party Snacks", "Healthy Snacks", "Bulk Bag"),
        (
            "A crunchy blend of cashews, almonds, pecans and pistachios.",
            "Perfect for snacking, baking and sharing.",
            "Packed in a facility that also handles peanuts.",
        ),
        plural=True,
    ),
    ProductType(
        "food",
        ("seasoning", "spice blend"),
        ("Seasoning", "Spice Blend", "Seasoning Blend", "Spice Rub", "Seasoning Mix"),
        _q(
            ("seasoning", "", f"{_FOOD} > Pantry Staples > Herbs, Spices & Seasonings > Mixed"),
            ("spice blend", "", f"{_FOOD} > Pantry Staples > Herbs, Spices & Seasonings > Rubs"),
        ),
        _split(
            "gluten free; non gmo; msg free; low sodium; usda organic; salt free; kosher "
            "certified; sugar free; keto friendly; no fillers"
        ),
        (SEASONING_FLAVORS, SEASONING_SIZES),
        (4, 22),
        ("All Purpose", "Gourmet", "Savory", "Chef Style", "Bold", "Classic"),
        ("for Chicken Steak Vegetables", "Grill Rub", "Kitchen Spice", "Shaker Jar"),
        (
            "Sprinkle on meats, vegetables, eggs and popcorn.",
            "A chef-style blend that makes weeknight dinners easy.",
            "Packed in a shaker jar with a sift and pour lid.",
        ),
    ),
    ProductType(
        "food",
        ("sparkling water", "flavored water"),
        ("Sparkling Water", "Flavored Sparkling Water", "Seltzer Water", "Sparkling Drink"),
        _q(
            ("sparkling water", "", f"{_FOOD} > Beverages > Bottled Beverages > Sparkling Water"),
        ),
        _split(
            "zero sugar; zero calories; caffeine free; non gmo; vegan friendly; gluten free; "
            "keto friendly; no artificial sweeteners; real fruit juice; bpa free cans"
        ),
        (WATER_FLAVORS, WATER_SIZES),
        (5, 32),
        ("Refreshing", "Crisp", "Bubbly", "Natural", "Light", "Classic"),
        ("Cans", "Variety Pack", "Soda Alternative", "Seltzer Cans"),
        (
            "Crisp bubbles with a light hint of fruit.",
            "Serve chilled or over ice.",
            "A refreshing alternative to soda.",
        ),
    ),
)

BEAUTY = (
    ProductType(
        "beauty",
        ("shampoo", "hair shampoo"),
        ("Shampoo", "Hair Shampoo", "Shampoo and Conditioner", "Clarifying Shampoo"),
        _q(
            ("shampoo", "", f"{_BEAUTY} > Hair Care > Shampoo & Conditioner > Shampoos"),
            (
                "shampoo and conditioner",
                "",
                f"{_BEAUTY} > Hair Care > Shampoo & Conditioner > Shampoo & Conditioner Sets",
            ),
        ),
        _split(
            "sulfate free; paraben free; for:dry hair; for:color treated hair; natural "
            "ingredients; for:hair growth; cruelty free; with:argan oil; silicone free; "
            "for:curly hair; vegan formula"
        ),
        (HAIR_SCENTS, HAIR_SIZES),
        (6, 32),
        ("Hydrating", "Nourishing", "Gentle", "Salon", "Daily", "Volumizing"),
        ("for Men and Women", "Hair Care", "Salon Quality", "Daily Hair Wash"),
        (
            "Lather into wet hair, massage the scalp and rinse well.",
            "Leaves hair soft, shiny and easy to comb.",
            "Safe for daily use.",
        ),
    ),
    ProductType(
        "beauty",
        ("lipstick", "lip color"),
        ("Lipstick", "Lip Color", "Liquid Lipstick", "Lip Stick", "Lip Stain"),
        _q(("lipstick", "", f"{_BEAUTY} > Makeup > Lips > Lipstick")),
        _split(
            "long lasting; highly pigmented; cruelty free; matte finish; paraben free; easy "
            "apply; transfer proof; moisturizing formula; vegan formula; smudge proof"
        ),
        (LIP_COLORS,),
        (5, 28),
        ("Velvet", "Creamy", "Bold", "Classic", "Luxe", "Everyday"),
        ("Lip Makeup", "Makeup for Women", "Gift for Her", "Lip Tint"),
        (
            "Glides on in one smooth stroke.",
            "Wear it alone or over your favorite liner.",
            "Remove with an oil-based makeup remover.",
        ),
    ),
    ProductType(
        "beauty",
        ("face serum", "facial serum", "serum"),
        ("Face Serum", "Facial Serum", "Serum", "Skin Serum", "Glow Serum"),
        _q(
            ("face serum", "", f"{_BEAUTY} > Skin Care > Face > Treatments & Masks > Serums"),
        ),
        _split(
            "hyaluronic acid; vitamin c; for:fine lines; for:sensitive skin; cruelty free; "
            "paraben free; fragrance free; dermatologist tested; anti aging; for:dark spots; "
            "oil free; with:niacinamide"
        ),
        (SERUM_SIZES,),
        (9, 48),
        ("Brightening", "Hydrating", "Daily", "Radiance", "Repair", "Glow"),
        ("for Face", "Skin Care for Women and Men", "Facial Treatment", "Daily Glow Drops"),
        (
            "Apply two or three drops to clean skin morning and night.",
            "Absorbs quickly and layers well under moisturizer.",
            "Do a patch test before first use.",
        ),
    ),
    ProductType(
        "beauty",
        ("body lotion", "moisturizer"),
        ("Body Lotion", "Moisturizer", "Body Cream", "Hand and Body Lotion"),
        _q(
            ("body lotion", "", f"{_BEAUTY} > Skin Care > Body > Moisturizers > Lotions"),
            ("moisturizer", "", f"{_BEAUTY} > Skin Care > Body > Moisturizers > Creams"),
        ),
        _split(
            "for:dry skin; fragrance free; non greasy; with:shea butter; paraben free; "
            "for:sensitive skin; long lasting; natural ingredients; fast absorbing; cruelty free"
        ),
        (LOTION_SCENTS, LOTION_SIZES),
        (5, 26),
        ("Daily", "Nourishing", "Intensive", "Soothing", "Rich", "Gentle"),
        ("for Women and Men", "Family Size", "Body Care", "Skin Care"),
        (
            "Smooth over skin after a shower or bath.",
            "Leaves skin feeling soft and comfortable all day.",
            "Gentle enough for the whole family.",
        ),
    ),
    ProductType(
        "beauty",
        ("nail polish",),
        ("Nail Polish", "Nail Lacquer", "Nail Color", "Gel Nail Polish"),
        _q(("nail polish", "", f"{_BEAUTY} > Foot, Hand & Nail Care > Nail Art & Polish")),
        _split(
            "quick drying; long lasting; non toxic; high shine; chip resistant; cruelty free; "
            "easy apply; vegan formula; gel effect; no uv lamp needed"
        ),
        (NAIL_COLORS,),
        (4, 22),
        ("Salon", "Glossy", "Classic", "Trendy", "Vibrant", "Pastel"),
        ("Manicure Pedicure", "Nail Art", "DIY Manicure", "Nail Lacquer Set"),
        (
            "Two thin coats give full, even color.",
            "Finish with a top coat for extra wear.",
            "Shake well before each use.",
        ),
    ),
    ProductType(
        "beauty",
        ("hair straightener", "flat iron"),
        ("Hair Straightener", "Flat Iron", "Straightener", "Straightening Iron"),
        _q(
            (
                "hair straightener",
                "",
                f"{_BEAUTY} > Hair Care > Styling Tools & Appliances > Flat Irons",
            ),
        ),
        _split(
            "ceramic tourmaline; fast heating; auto shut off; adjustable temperature; dual "
            "voltage; for:all hair types; with:swivel cord; with:digital display; floating plates"
        ),
        (TOOL_COLORS, IRON_SIZES),
        (20, 95),
        ("Professional", "Salon", "Compact", "Travel", "Sleek", "Smooth"),
        ("2 in 1 Straightener and Curler", "Hair Styling Tool", "Straightening Tool"),
        (
            "Heats up in about 30 seconds.",
            "Glides through hair without pulling or snagging.",
            "Includes a heat-resistant pouch and a one-year warranty.",
        ),
    ),
    ProductType(
        "beauty",
        ("deodorant",),
        ("Deodorant", "Natural Deodorant", "Deodorant Stick", "Body Deodorant"),
        _q(
            (
                "deodorant",
                "",
                f"{_BEAUTY} > Personal Care > Deodorants & Antiperspirants > Deodorant",
            ),
        ),
        _split(
            "aluminum free; long lasting; for:sensitive skin; natural ingredients; cruelty free; "
            "paraben free; baking soda free; travel size; vegan formula; plastic free"
        ),
        (DEODORANT_SCENTS, DEODORANT_SIZES),
        (5, 22),
        ("Fresh", "Clean", "Gentle", "Everyday", "Classic", "Light"),
        ("for Women and Men", "Underarm Care", "Odor Protection", "Body Care"),
        (
            "Glides on smoothly and dries fast.",
            "Keeps you feeling fresh from morning to night.",
            "Apply to clean, dry underarms.",
        ),
    ),
    ProductType(
        "beauty",
        ("makeup brushes", "makeup brush set"),
        ("Makeup Brushes", "Makeup Brush Set", "Brush Set", "Cosmetic Brushes"),
        _q(("makeup brushes", "", f"{_BEAUTY} > Tools & Accessories > Makeup Brushes & Tools")),
        _split(
            "synthetic bristles; easy clean; with:travel case; cruelty free; dense bristles; "
            "wooden handles; for:liquid foundation; lightweight handles; shed free"
        ),
        (BRUSH_COLORS, BRUSH_STYLES),
        (7, 32),
        ("Premium", "Professional", "Essential", "Luxury", "Beginner", "Complete"),
        ("for Foundation Powder Blush", "Makeup Tools", "Cosmetic Brush Kit", "Gift Set"),
        (
            "Covers face, eyes and brows in one kit.",
            "Wash gently with mild soap and lay flat to dry.",
            "A thoughtful gift for makeup lovers.",
        ),
        plural=True,
    ),
    ProductType(
        "beauty",
        ("sunscreen", "sunscreen lotion"),
        ("Sunscreen", "Sunscreen Lotion", "Sun Cream", "Face Sunscreen", "Mineral Sunscreen"),
        _q(("sunscreen", "", f"{_BEAUTY} > Skin Care > Sunscreens & Tanning Products")),
        _split(
            "water resistant; reef safe; broad spectrum; oil free; for:sensitive skin; fragrance "
            "free; non greasy; paraben free; zinc oxide; dermatologist tested"
        ),
        (SPF_STYLES, SUN_SIZES),
        (7, 30),
        ("Daily", "Sheer", "Lightweight", "Sport", "Mineral", "Gentle"),
        ("for Face and Body", "Sun Protection", "Beach Essentials", "Outdoor Skin Care"),
        (
            "Apply generously 15 minutes before sun exposure.",
            "Reapply after swimming, sweating or towel drying.",
            "Rubs in without leaving a white cast.",
        ),
    ),
)

FURNITURE = (
    ProductType(
        "furniture",
        ("office chair", "desk chair"),
        ("Office Chair", "Desk Chair", "Computer Chair", "Task Chair", "Executive Chair"),
        _q(
            ("office chair", "", f"{_HOME} > Home Office Furniture > Home Office Chairs"),
            ("desk chair", "", f"{_HOME} > Home Office Furniture > Home Office Desk Chairs"),
        ),
        _split(
            "lumbar support; adjustable height; high back; easy assemble; with:padded armrests; "
            "breathable mesh; heavy duty; ergonomic design; pu leather; with:rolling casters; "
            "tilt lock"
        ),
        (CHAIR_COLORS, CHAIR_STYLES),
        (60, 320),
        ("Modern", "Comfortable", "Executive", "Gaming", "Home Office", "Mid Back"),
        ("for Home Office", "Swivel Task Chair", "Rolling Work Chair", "Study Chair"),
        (
            "Supports up to 300 pounds.",
            "The seat rotates a full 360 degrees.",
            "All tools and instructions are included in the box.",
        ),
    ),
    ProductType(
        "furniture",
        ("computer desk", "desk", "writing desk"),
        ("Computer Desk", "Writing Desk", "Office Desk", "Study Desk", "Gaming Desk"),
        _q(
            ("computer desk", "", f"{_HOME} > Home Office Furniture > Home Office Desks"),
            ("writing desk", "", f"{_HOME} > Home Office Furniture > Writing Desks"),
        ),
        _split(
            "easy assemble; with:storage shelves; metal frame; space saving; heavy duty; cable "
            "management; engineered wood; for:home office; with:keyboard tray; adjustable feet; "
            "with:storage drawers"
        ),
        (FURNITURE_COLORS, DESK_SIZES),
        (60, 260),
        ("Modern", "Simple", "Industrial", "Rustic", "Sturdy", "Compact"),
        ("Study Writing Table", "Workstation", "PC Table", "Laptop Table"),
        (
            "The desktop fits a monitor, a laptop and a lamp side by side.",
            "Numbered parts make setup take about 30 minutes.",
            "Wipe the surface with a damp cloth.",
        ),
    ),
    ProductType(
        "furniture",
        ("bookshelf", "bookcase"),
        ("Bookshelf", "Bookcase", "Shelving Unit", "Ladder Shelf", "Display Shelf"),
        _q(
            ("bookshelf", "", f"{_HOME} > Living Room Furniture > Bookcases"),
            ("bookcase", "", f"{_HOME} > Home Office Furniture > Bookcases"),
        ),
        _split(
            "easy assemble; space saving; engineered wood; metal frame; with:anti tip kit; "
            "industrial style; for:living room; open shelves; adjustable shelves; solid wood"
        ),
        (FURNITURE_COLORS, SHELF_SIZES),
        (40, 220),
        ("Tall", "Modern", "Rustic", "Industrial", "Farmhouse", "Minimalist"),
        ("Storage Rack", "Book Shelves", "Display Stand", "Storage Organizer"),
        (
            "Each tier holds up to 40 pounds.",
            "Show off books, plants, photos and collectibles.",
            "Fits neatly in corners, hallways and small rooms.",
        ),
    ),
    ProductType(
        "furniture",
        ("sofa", "loveseat", "couch"),
        ("Sofa", "Loveseat", "Couch", "Sofa Couch", "Sleeper Sofa"),
        _q(
            ("sofa", "", f"{_HOME} > Living Room Furniture > Sofas & Couches"),
            ("loveseat", "", f"{_HOME} > Living Room Furniture > Sofas & Couches > Loveseats"),
        ),
        _split(
            "solid wood; for:living room; easy assemble; high density foam; removable cushions; "
            "mid century; tufted back; with:wooden legs; for:small spaces; pocket coils"
        ),
        (SOFA_COLORS, SOFA_MATERIALS),
        (220, 900),
        ("Modern", "Comfy", "Upholstered", "Contemporary", "Classic", "Cozy"),
        ("3 Seater Couch", "2 Seater Couch", "Apartment Sofa", "Lounge Set"),
        (
            "Seats two to three adults comfortably.",
            "Ships in one box; legs attach in minutes.",
            "Vacuum the upholstery regularly to keep it fresh.",
        ),
    ),
    ProductType(
        "furniture",
        ("bed frame", "platform bed"),
        ("Bed Frame", "Platform Bed", "Bed Frame with Headboard", "Metal Bed Frame"),
        _q(
            ("bed frame", "", f"{_HOME} > Bedroom Furniture > Beds, Frames & Bases > Bed Frames"),
            ("platform bed", "", f"{_HOME} > Bedroom Furniture > Beds, Frames & Bases > Beds"),
        ),
        _split(
            "under bed storage; noise free; easy assemble; heavy duty; wood slats; "
            "with:upholstered headboard; no box spring needed; steel frame; with:led lights"
        ),
        (BED_SIZES, FURNITURE_COLORS),
        (90, 450),
        ("Modern", "Sturdy", "Minimalist", "Industrial", "Classic", "Farmhouse"),
        ("Mattress Foundation", "Bedroom Furniture", "Bed Base", "Platform Bed Frame"),
        (
            "Holds up to 1,500 pounds across the frame.",
            "Leaves room underneath for bins and suitcases.",
            "Mattress not included.",
        ),
    ),
    ProductType(
        "furniture",
        ("bar stools", "counter stools"),
        ("Bar Stools", "Counter Stools", "Barstools", "Kitchen Stools"),
        _q(("bar stools", "", f"{_HOME} > Game & Recreation Room Furniture > Home Bar Furniture")),
        _split(
            "adjustable height; swivel seat; with:footrest; pu leather; easy assemble; counter "
            "height; metal legs; with:low backrest; armless design; floor protectors"
        ),
        (CHAIR_COLORS, STOOL_SETS),
        (60, 260),
        ("Modern", "Industrial", "Farmhouse", "Upholstered", "Classic", "Sleek"),
        ("for Kitchen Island", "Dining Bar Chairs", "Pub Stools", "Breakfast Bar Stools"),
        (
            "Each stool holds up to 250 pounds.",
            "A comfy seat for breakfast, homework and game nights.",
            "Hardware and instructions are included.",
        ),
        plural=True,
    ),
    ProductType(
        "furniture",
        ("tv stand", "entertainment center"),
        ("TV Stand", "Entertainment Center", "Media Console", "TV Console", "TV Cabinet"),
        _q(
            ("tv stand", "", f"{_HOME} > Living Room Furniture > Television Stands"),
            (
                "entertainment center",
                "",
                f"{_HOME} > Living Room Furniture > Entertainment Centers",
            ),
        ),
        _split(
            "with:storage shelves; cable management; engineered wood; easy assemble; for:living "
            "room; with:led lights; sliding barn doors; farmhouse style; open cubbies; metal legs"
        ),
        (FURNITURE_COLORS, TV_SIZES),
        (80, 360),
        ("Modern", "Rustic", "Mid Century", "Industrial", "Low Profile", "Wood"),
        ("Media Storage Cabinet", "Console Table", "TV Table", "Entertainment Unit"),
        (
            "The top holds up to 120 pounds.",
            "Room for game consoles, streaming boxes and speakers.",
            "Adjust the shelves to fit your devices.",
        ),
    ),
    ProductType(
        "furniture",
        ("nightstand", "end table", "bedside table"),
        ("Nightstand", "End Table", "Bedside Table", "Side Table", "Night Stand"),
        _q(
            ("nightstand", "", f"{_HOME} > Bedroom Furniture > Nightstands"),
            ("end table", "", f"{_HOME} > Living Room Furniture > Tables > End Tables"),
        ),
        _split(
            "with:storage drawer; easy assemble; space saving; for:bedroom; "
            "with:charging station; solid wood; open shelf; metal handles; engineered wood; "
            "fabric drawers"
        ),
        (FURNITURE_COLORS, STAND_SETS),
        (30, 160),
        ("Modern", "Small", "Rustic", "Minimalist", "Farmhouse", "Industrial"),
        ("Bedside Furniture", "Accent Table", "Sofa Side Table", "Small Spaces"),
        (
            "Keeps a lamp, a book and your phone within reach.",
            "Fits beside a bed, a sofa or an armchair.",
            "The top wipes clean with a damp cloth.",
        ),
    ),
)

ELECTRONICS = (
    ProductType(
        "electronics",
        ("wireless earbuds", "bluetooth earbuds", "earbuds"),
        ("Wireless Earbuds", "Bluetooth Earbuds", "Earbuds", "In-Ear Headphones", "Earphones"),
        _q(
            (
                "wireless earbuds",
                "",
                "Electronics > Headphones, Earbuds & Accessories > Earbud Headphones",
            ),
            (
                "bluetooth headphones",
                "",
                "Electronics > Headphones, Earbuds & Accessories > Headphones",
            ),
        ),
        _split(
            "noise cancelling; with:charging case; water resistant; touch control; long battery "
            "life; built in microphone; deep bass; bluetooth 5.3; ear hooks; low latency"
        ),
        (GADGET_COLORS,),
        (15, 130),
        ("True Wireless", "Sport", "Mini", "Premium", "Stereo", "Hi-Fi"),
        ("for iPhone Android", "Sports Headphones", "Running Earphones", "Headset with Mic"),
        (
            "Pairs automatically after the first connection.",
            "Comes with three sizes of ear tips for a secure fit.",
            "Includes a USB charging cable and a user manual.",
        ),
        plural=True,
        pair=True,
    ),
    ProductType(
        "electronics",
        ("phone case", "case"),
        ("Phone Case", "Case", "Protective Case", "Cover", "Slim Case"),
        _q(
            (
                "phone case",
                "",
                "Cell Phones & Accessories > Cases, Holsters & Sleeves > Basic Cases",
            ),
        ),
        _split(
            "shock absorbing; wireless charging compatible; raised edges; scratch resistant; "
            "with:card holder; with:kickstand; military grade; anti yellowing; magsafe "
            "compatible; slim profile"
        ),
        (CASE_COLORS, PHONE_MODELS),
        (6, 35),
        ("Protective", "Clear", "Slim", "Rugged", "Cute", "Minimalist"),
        ("Phone Cover", "Protective Bumper", "Shockproof Cover", "Designed for Phone"),
        (
            "Precise cutouts keep every button and port easy to reach.",
            "Snaps on in seconds and stays put.",
            "Please check your phone model before ordering.",
        ),
    ),
    ProductType(
        "electronics",
        ("charging cable", "charger cable"),
        ("Charging Cable", "Charger Cable", "Fast Charger Cord", "Data Cable"),
        _q(
            (
                "charging cable",
                "",
                "Electronics > Computers & Accessories > Computer Accessories > Cables",
            ),
        ),
        _split(
            "fast charging; nylon braided; tangle free; data sync; aluminum connectors; "
            "high speed; right angle; reinforced joints"
        ),
        (GADGET_COLORS, CABLE_LENGTHS, CABLE_STYLES),
        (5, 25),
        ("Durable", "Premium", "Long", "Short", "Heavy Duty", "Multi Pack"),
        ("Cord", "Charger Cord", "Charging Wire", "Phone Charger Cable"),
        (
            "Tested to survive more than 10,000 bends.",
            "Works with phones, tablets, earbuds and more.",
            "Backed by a 12-month replacement promise.",
        ),
    ),
    ProductType(
        "electronics",
        ("wall charger", "charger", "charging block"),
        ("Wall Charger", "Charger", "Charging Block", "Power Adapter", "Charger Plug"),
        _q(
            (
                "usb c charger",
                "",
                "Cell Phones & Accessories > Accessories > Chargers & Power Adapters",
            ),
            ("wall charger", "", "Cell Phones & Accessories > Chargers > Wall Chargers"),
        ),
        _split(
            "fast charging; dual port; foldable plug; gan technology; overheat protection; "
            "compact design; travel friendly; multi device"
        ),
        (GADGET_COLORS, CHARGER_STYLES),
        (9, 55),
        ("Compact", "Fast", "Mini", "Universal", "Travel", "Powerful"),
        ("Power Adapter", "Charging Block", "Charger Brick", "Phone Charger"),
        (
            "Charges a phone to half in about thirty minutes.",
            "Smart chips deliver the right current to each device.",
            "Fits in a pocket or a small travel pouch.",
        ),
    ),
    ProductType(
        "electronics",
        ("bluetooth speaker", "portable speaker", "speaker"),
        ("Bluetooth Speaker", "Portable Speaker", "Wireless Speaker", "Speaker"),
        _q(
            ("bluetooth speaker", "", "Electronics > Portable Audio & Video > Portable Speakers"),
            ("portable speaker", "", "Electronics > Portable Audio & Video > Portable Speakers"),
        ),
        _split(
            "waterproof; stereo sound; long battery life; hands free calling; deep bass; "
            "with:led lights; with:usb charging; pairs two speakers; shockproof; with:carry strap"
        ),
        (GADGET_COLORS,),
        (18, 150),
        ("Portable", "Outdoor", "Mini", "Loud", "Rugged", "Party"),
        ("for Home Outdoor Travel", "Wireless Party Speaker", "Beach Speaker", "Shower Speaker"),
        (
            "Fills a room or a backyard with clear sound.",
            "Connects from up to 100 feet away.",
            "A handy companion for camping, biking and beach days.",
        ),
    ),
    ProductType(
        "electronics",
        ("computer monitor", "monitor"),
        ("Computer Monitor", "Monitor", "Gaming Monitor", "Desktop Monitor", "PC Monitor"),
        _q(
            ("computer monitor", "", "Electronics > Computers & Accessories > Monitors"),
            ("gaming monitor", "", "Electronics > Computers & Accessories > Monitors > Gaming"),
        ),
        _split(
            "full hd; ultra hd; eye care; vesa mount; high refresh rate; with:hdmi port; ips "
            "panel; built in speakers; frameless design; adaptive sync"
        ),
        (MONITOR_SIZES,),
        (90, 420),
        ("Ultra Slim", "Curved", "Office", "Gaming", "Professional", "Widescreen"),
        ("for Home Office", "Computer Screen", "PC Display", "Desktop Display"),
        (
            "Connect a laptop, a desktop or a game console.",
            "Tilt the screen to find a comfortable angle.",
            "Includes a power adapter and a video cable.",
        ),
    ),
    ProductType(
        "electronics",
        ("wireless keyboard", "keyboard"),
        ("Wireless Keyboard", "Keyboard", "Bluetooth Keyboard", "Keyboard and Mouse"),
        _q(
            (
                "wireless keyboard",
                "",
                "Electronics > Computers & Accessories > Keyboards, Mice & Accessories",
            ),
            (
                "gaming keyboard",
                "",
                "Electronics > Computers & Accessories > Keyboards, Mice & Accessories > Gaming",
            ),
        ),
        _split(
            "rechargeable battery; quiet keys; with:backlit keys; multi device; ergonomic design; "
            "plug and play; mechanical switches; with:number pad; spill resistant; low profile"
        ),
        (GADGET_COLORS, KEYBOARD_STYLES),
        (20, 130),
        ("Slim", "Compact", "Full Size", "Ergonomic", "Portable", "Gaming"),
        ("for Windows Mac", "Computer Keyboard", "Laptop Keyboard", "Office Keyboard"),
        (
            "Connects through a tiny USB receiver or directly to your laptop.",
            "Sized for desks, couches and travel bags.",
            "Works with Windows, Mac, Chrome OS and tablets.",
        ),
    ),
    ProductType(
        "electronics",
        ("smart watch", "fitness tracker"),
        ("Smart Watch", "Fitness Tracker", "Smartwatch", "Activity Tracker"),
        _q(
            ("smart watch", "", "Electronics > Wearable Technology > Smartwatches"),
            ("fitness tracker", "", "Electronics > Wearable Technology > Activity Trackers"),
        ),
        _split(
            "heart rate; sleep tracking; water resistant; long battery life; step counter; touch "
            "screen; message notifications; gps tracking; blood oxygen; with:magnetic charger"
        ),
        (GADGET_COLORS, WATCH_SIZES),
        (25, 220),
        ("Fitness", "Sport", "Smart", "Health", "Slim", "Activity"),
        ("for Android iPhone", "Fitness Watch", "Health Monitor Watch", "Activity Band"),
        (
            "Shows calls, texts and app alerts on your wrist.",
            "Over 100 sport modes for running, cycling and yoga.",
            "Syncs with a free app on your phone.",
        ),
    ),
    ProductType(
        "electronics",
        ("screen protector",),
        ("Screen Protector", "Glass Screen Protector", "Screen Guard", "Glass Protector"),
        _q(
            (
                "screen protector",
                "",
                "Cell Phones & Accessories > Accessories > Maintenance, Upkeep & Repairs > Screen"
                " Protectors",
            ),
        ),
        _split(
            "tempered glass; bubble free; case friendly; high definition; easy installation; "
            "scratch resistant; anti fingerprint; privacy filter; full coverage"
        ),
        (PROTECTOR_MODELS, PROTECTOR_PACKS),
        (5, 20),
        ("Ultra Clear", "Premium", "Tough", "Crystal", "Shatterproof", "Thin"),
        ("Glass Film", "Display Protector", "Screen Cover", "Protective Film"),
        (
            "An alignment frame puts it on straight the first time.",
            "Touch response stays as smooth as the bare screen.",
            "Each pack includes wipes and dust stickers.",
        ),
        plural=True,
    ),
)

PRODUCT_TYPES: dict[str, tuple[ProductType, ...]] = {
    "beauty": BEAUTY,
    "food": FOOD,
    "fashion": FASHION,
    "furniture": FURNITURE,
    "electronics": ELECTRONICS,
}

# --- attribute blurbs (bullet text) ---------------------------------------------------------
# One sentence per attribute, used as "ATTRIBUTE: sentence" bullets. A blurb names only its own
# attribute (tests check that no other attribute of the same type leaks into it).

BLURBS: dict[str, str] = {
    # fashion
    "machine wash": "Toss it in the washer on a gentle cycle with like colors.",
    "short sleeve": "Cut to sit just above the elbow for warm days.",
    "moisture wicking": "Pulls sweat away from skin so you stay dry and cool.",
    "slim fit": "Tailored close to the body for a sharp, modern look.",
    "relaxed fit": "Roomy through the body for easy movement and all-day comfort.",
    "crew neck": "A classic round neckline that never goes out of style.",
    "v neck": "A flattering neckline that layers nicely under jackets.",
    "quick drying": "Dries fast, so you can get on with your day.",
    "cotton blend": "Cotton mixed with a little polyester for softness and shape.",
    "tagless collar": "Printed labels instead of scratchy tags.",
    "tumble dry": "Safe in the dryer on low heat.",
    "chest pocket": "A handy pocket for sunglasses or earbuds.",
    "elastic waist": "A stretchy band fits comfortably without a belt.",
    "floral print": "A cheerful pattern of blossoms across the fabric.",
    "side pockets": "Hidden pockets hold a phone, keys or lip balm.",
    "knee length": "The hem falls right around the knee.",
    "high waist": "Sits at the natural waist to lengthen the legs.",
    "polyester spandex": "A stretchy knit that keeps its shape.",
    "ruffle sleeve": "Playful ruffles add movement at the shoulders.",
    "tie waist": "A self-tie sash cinches the shape just right.",
    "button front": "Buttons run from the neckline to the hem.",
    "beach vacation": "Light enough for sunny resorts, boardwalks and island trips.",
    "straight leg": "Runs straight from hip to ankle for a timeless line.",
    "stretch fabric": "Gives when you move and recovers its shape.",
    "button closure": "A sturdy metal button at the waist.",
    "five pocket": "Two front pockets, a coin pocket and two back pockets.",
    "zipper fly": "A smooth metal zipper that stays closed.",
    "wide leg": "A roomy, flowing leg opening.",
    "ripped knee": "Distressed details at the knees for a lived-in look.",
    "bootcut": "Flares slightly at the hem to fit over boots.",
    "non slip": "The tread grips wet and dry floors with confidence.",
    "rubber sole": "A durable outsole that flexes with every step.",
    "lace up": "Classic laces let you adjust the fit.",
    "breathable mesh": "Airy panels keep air flowing on hot days.",
    "arch support": "A contoured footbed cradles the arch.",
    "memory foam": "A plush insole that molds to your foot.",
    "shock absorbing": "Takes the sting out of every impact.",
    "wide toe box": "Extra room up front lets toes spread naturally.",
    "removable insole": "Swap in your own orthotics whenever you like.",
    "knit upper": "A sock-like upper hugs the foot.",
    "reflective details": "Shine back at headlights on early and late runs.",
    "plantar fasciitis": "Extra heel cushioning eases pressure on sore feet.",
    "waterproof": "Keeps water out in rain, puddles and snow.",
    "faux fur": "A plush lining that traps warmth.",
    "side zipper": "Zip on and off in seconds.",
    "steel toe": "Protects toes from heavy drops on the job site.",
    "leather upper": "Crafted with supple leather that ages well.",
    "block heel": "A stable, chunky heel you can wear all day.",
    "warm lining": "A cozy inner layer for cold mornings.",
    "pull on": "Easy loops at the back help you step right in.",
    "slip resistant outsole": "Deep lugs bite into slick surfaces.",
    "fleece lined": "Brushed fleece inside feels soft and warm.",
    "drawstring hood": "Adjust the hood to block the wind.",
    "kangaroo pocket": "A front pouch warms your hands and holds a phone.",
    "long sleeve": "Full-length sleeves for cooler weather.",
    "zip up": "A full zipper makes it easy to layer.",
    "ribbed cuffs": "Stretchy cuffs hold the sleeves in place.",
    "oversized fit": "A roomy, drop-shoulder cut for a laid-back look.",
    "thumb holes": "Keep the sleeves down over your hands.",
    "heavyweight fabric": "A thick, substantial knit built to last.",
    "cushioned sole": "Padding underfoot softens every step.",
    "no show": "Hides below the shoe line.",
    "compression fit": "Gentle pressure supports tired legs.",
    "odor control": "Treated yarns help keep feet smelling fresh.",
    "reinforced heel": "Extra yarn where wear happens most.",
    "seamless toe": "Smooth at the toes so nothing rubs.",
    "bamboo fiber": "Soft, breathable yarn spun from bamboo.",
    "vegan leather": "Animal-free material with a soft, pebbled feel.",
    "adjustable strap": "Change the drop to wear it on the shoulder or across the body.",
    "zipper closure": "The main compartment zips shut to keep things safe.",
    "large capacity": "Plenty of room for everyday essentials.",
    "multiple pockets": "Inner and outer pockets keep things organized.",
    "water resistant": "Holds up to splashes, sweat and rain.",
    "top handle": "A sturdy handle for carrying by hand.",
    "gold hardware": "Polished metal accents add a touch of shine.",
    "laptop sleeve": "A padded slot fits most 13 inch laptops.",
    "magnetic snap": "Opens and closes with one hand.",
    "stainless steel": "A corrosion-proof case and buckle.",
    "quartz movement": "Accurate timekeeping from a reliable movement.",
    "analog display": "Classic hands and hour markers.",
    "leather band": "A genuine leather strap that softens over time.",
    "date window": "Shows the date at the three o'clock position.",
    "luminous hands": "Glows in the dark for easy reading at night.",
    "scratch resistant": "A hard surface stays clear of everyday scuffs.",
    "gift box": "Arrives in an elegant box ready for gifting.",
    "minimalist dial": "A clean face with no clutter.",
    # food
    "gluten free": "Made without wheat, barley or rye.",
    "non gmo": "Made from ingredients that are not genetically engineered.",
    "usda organic": "Certified by the USDA National Organic Program.",
    "fair trade": "Sourced through partnerships that pay farmers fairly.",
    "single origin": "Grown by one region's farms for a distinct taste.",
    "low acid": "Gentle on sensitive stomachs.",
    "kosher certified": "Prepared under strict kosher supervision.",
    "small batch": "Produced in small lots for consistent quality.",
    "arabica beans": "Only high-grown beans with a sweet, balanced cup.",
    "nitrogen flushed": "Packed with nitrogen to lock in freshness.",
    "resealable bag": "A zip top keeps the rest fresh.",
    "caffeine free": "Enjoy a cup any time of day or night.",
    "individually wrapped": "Each piece is sealed on its own for freshness.",
    "natural ingredients": "Made with ingredients you can pronounce.",
    "plastic free": "Packaging made without plastic.",
    "compostable bags": "The bags break down in a home compost bin.",
    "low calorie": "A lighter choice for mindful snacking.",
    "kettle cooked": "Cooked in batches for an extra crunch.",
    "vegan friendly": "Contains no animal products.",
    "nut free": "Made in a facility free of tree nuts and peanuts.",
    "whole grain": "Made with the entire kernel for extra goodness.",
    "low sodium": "Less salt without losing flavor.",
    "plant based": "Made entirely from plants.",
    "avocado oil": "Cooked in oil pressed from ripe avocados.",
    "high protein": "Packed with protein to keep you going.",
    "low fat": "A lean snack without the grease.",
    "keto friendly": "Fits a low-carb lifestyle.",
    "grass fed": "Made from cattle raised on pasture.",
    "msg free": "No monosodium glutamate added.",
    "low sugar": "Only a few grams of sugar per serving.",
    "nitrate free": "Cured without added nitrates or nitrites.",
    "soy free": "Contains no soy ingredients.",
    "dairy free": "Contains no milk ingredients.",
    "low carb": "Just a few net carbs per serving.",
    "high fiber": "A good source of dietary fiber.",
    "sugar free": "Sweetened without any added sugar.",
    "single serve": "Portioned for one.",
    "real cocoa butter": "Made with genuine cocoa butter for a silky melt.",
    "dry roasted": "Roasted without oil for a clean crunch.",
    "no added sugar": "Only the natural sweetness of the ingredients.",
    "heart healthy": "A good source of unsaturated fats.",
    "salt free": "Big flavor with zero salt.",
    "no fillers": "Pure herbs and spices with nothing else mixed in.",
    "zero sugar": "Contains no sugar at all.",
    "zero calories": "Refreshment without a single calorie.",
    "no artificial sweeteners": "Flavored only with natural essences.",
    "real fruit juice": "A splash of real juice in every can.",
    "bpa free cans": "Can linings are made without BPA.",
    # beauty
    "sulfate free": "Cleans gently without harsh detergents.",
    "paraben free": "Formulated without parabens.",
    "dry hair": "Restores moisture to parched strands.",
    "color treated hair": "Gentle enough to protect dyed hair.",
    "hair growth": "Helps encourage thicker, fuller-looking hair.",
    "cruelty free": "Never tested on animals.",
    "argan oil": "Enriched with nourishing Moroccan oil.",
    "silicone free": "No buildup that weighs hair down.",
    "curly hair": "Defines waves and coils without frizz.",
    "vegan formula": "Contains no animal-derived ingredients.",
    "long lasting": "Stays put for hours without touch-ups.",
    "highly pigmented": "Rich color payoff in a single swipe.",
    "matte finish": "A velvety, shine-free look.",
    "easy apply": "Goes on smoothly and evenly.",
    "transfer proof": "Will not rub off on cups or masks.",
    "moisturizing formula": "Keeps lips soft and comfortable.",
    "smudge proof": "Keeps crisp edges all day.",
    "hyaluronic acid": "Draws moisture into the skin for a plump look.",
    "vitamin c": "Brightens dull skin and evens tone.",
    "fine lines": "Smooths the look of wrinkles over time.",
    "sensitive skin": "Gentle enough for easily irritated skin.",
    "fragrance free": "Contains no added perfume.",
    "dermatologist tested": "Tested under the supervision of dermatologists.",
    "anti aging": "Targets the visible signs of aging.",
    "dark spots": "Fades the look of discoloration.",
    "oil free": "Will not leave skin shiny.",
    "niacinamide": "Helps refine the look of pores.",
    "dry skin": "Quenches rough, flaky patches.",
    "non greasy": "Sinks in without a sticky feel.",
    "shea butter": "Rich, nourishing butter softens the skin.",
    "fast absorbing": "Soaks in within seconds.",
    "non toxic": "Made without the most common harsh chemicals.",
    "high shine": "A glossy, glass-like finish.",
    "chip resistant": "Resists peeling for days.",
    "gel effect": "The plump look of a salon gel.",
    "no uv lamp needed": "Cures in natural light.",
    "ceramic tourmaline": "Plates that spread heat evenly and fight frizz.",
    "fast heating": "Ready to style in seconds.",
    "auto shut off": "Turns itself off after an hour of no use.",
    "adjustable temperature": "Choose the right heat for your hair.",
    "dual voltage": "Works around the world with a plug adapter.",
    "all hair types": "Works on fine, thick, straight and curly hair alike.",
    "swivel cord": "The cord turns freely so it never tangles.",
    "digital display": "Shows the exact heat setting.",
    "floating plates": "Plates flex to keep even pressure.",
    "aluminum free": "Lets your body breathe naturally.",
    "baking soda free": "Kind to skin that reacts to soda.",
    "travel size": "Small enough for carry-on bags.",
    "synthetic bristles": "Soft man-made fibers that blend smoothly.",
    "easy clean": "Rinses clean in seconds.",
    "travel case": "A zip pouch keeps everything tidy on trips.",
    "dense bristles": "Packed tightly for flawless coverage.",
    "wooden handles": "Balanced handles made from wood.",
    "liquid foundation": "Buffs liquid and cream bases to a seamless finish.",
    "lightweight handles": "Easy to hold through a full routine.",
    "shed free": "Fibers stay put, wash after wash.",
    "reef safe": "Made without oxybenzone and octinoxate.",
    "broad spectrum": "Guards against UVA and UVB rays.",
    "zinc oxide": "A mineral filter that sits on the skin.",
    # furniture
    "lumbar support": "A curved backrest supports the lower back.",
    "adjustable height": "Raise or lower the seat with one lever.",
    "high back": "Supports the shoulders and the neck.",
    "easy assemble": "Goes together in minutes with the included tools.",
    "padded armrests": "Soft rests take pressure off the elbows.",
    "heavy duty": "Built from thick, strong materials.",
    "ergonomic design": "Shaped to keep your posture natural.",
    "pu leather": "A soft, wipeable faux leather cover.",
    "rolling casters": "Smooth wheels glide across floors.",
    "tilt lock": "Lock the backrest at your favorite angle.",
    "storage shelves": "Extra shelves hold books, files and devices.",
    "metal frame": "A powder-coated frame keeps everything steady.",
    "space saving": "A small footprint for tight spots.",
    "cable management": "Keeps wires tidy and out of sight.",
    "engineered wood": "Durable boards with a wood grain finish.",
    "home office": "Sized for a spare room, a nook or a dorm.",
    "keyboard tray": "A pull-out tray frees up the desktop.",
    "adjustable feet": "Level it out on uneven floors.",
    "storage drawers": "Drawers keep supplies close at hand.",
    "anti tip kit": "Wall anchors keep it from tipping over.",
    "industrial style": "Wood and metal for a loft look.",
    "living room": "Sized to suit lounges, dens and family rooms.",
    "open shelves": "Everything is on display and easy to reach.",
    "adjustable shelves": "Move the shelves to fit taller items.",
    "solid wood": "Crafted from real hardwood for strength.",
    "high density foam": "A supportive seat that keeps its shape.",
    "removable cushions": "Take the covers off for cleaning.",
    "mid century": "Clean lines inspired by the 1950s.",
    "tufted back": "Button tufting adds a tailored look.",
    "wooden legs": "Tapered legs lift the frame off the floor.",
    "small spaces": "Fits apartments, studios and dorm rooms.",
    "pocket coils": "Springs inside the seat give gentle bounce.",
    "under bed storage": "Plenty of clearance for bins and boxes.",
    "noise free": "Padded joints keep it quiet.",
    "wood slats": "Slats support the mattress evenly.",
    "upholstered headboard": "A padded headboard for reading in bed.",
    "no box spring needed": "The base supports a mattress on its own.",
    "steel frame": "A rigid base built for years of use.",
    "led lights": "Color-changing lights set the mood.",
    "swivel seat": "Turns all the way around for easy conversation.",
    "footrest": "A ring to rest your feet on.",
    "counter height": "Made for 36 inch kitchen counters.",
    "metal legs": "Sturdy legs with a powder-coated finish.",
    "low backrest": "Supports the lower back without blocking the view.",
    "armless design": "Slides neatly under the counter.",
    "floor protectors": "Pads on the feet keep floors free of marks.",
    "sliding barn doors": "Doors glide open to reveal storage.",
    "farmhouse style": "Rustic charm with a modern twist.",
    "open cubbies": "Cubbies fit consoles and streaming boxes.",
    "storage drawer": "A drawer keeps small things out of sight.",
    "bedroom": "Sized to sit right beside the bed.",
    "charging station": "Outlets and USB ports power your devices.",
    "open shelf": "A lower shelf for books and baskets.",
    "metal handles": "Sturdy pulls in a brushed finish.",
    "fabric drawers": "Soft bins pull out easily.",
    # electronics
    "noise cancelling": "Blocks out traffic, chatter and engine hum.",
    "charging case": "The case adds extra hours of play on the go.",
    "touch control": "Tap to play, pause, skip and answer calls.",
    "long battery life": "Runs for hours between charges.",
    "built in microphone": "Clear voice pickup for calls.",
    "deep bass": "Punchy low end for every genre.",
    "bluetooth 5.3": "A stable, fast wireless connection.",
    "ear hooks": "Stay put during intense workouts.",
    "low latency": "Audio stays in sync with games and videos.",
    "wireless charging compatible": "Charge without taking it off.",
    "raised edges": "Lips around the screen and camera guard against drops.",
    "card holder": "Slots on the back hold cards and cash.",
    "kickstand": "Fold it out to watch videos hands-free.",
    "military grade": "Drop tested from ten feet.",
    "anti yellowing": "Stays crystal clear over time.",
    "magsafe compatible": "Built-in magnets snap onto chargers and mounts.",
    "slim profile": "Adds almost no bulk in a pocket.",
    "fast charging": "Fills the battery in a fraction of the time.",
    "nylon braided": "A tough woven jacket resists fraying.",
    "tangle free": "Lays flat and coils neatly.",
    "data sync": "Moves photos and files at full speed.",
    "aluminum connectors": "Metal housings protect the plugs.",
    "high speed": "Moves data and power at full speed.",
    "right angle": "A 90 degree plug stays out of the way while gaming.",
    "reinforced joints": "Strain relief protects the weakest spots.",
    "dual port": "Charge two devices at once.",
    "foldable plug": "Prongs fold away for travel.",
    "gan technology": "Gallium nitride parts keep it small and cool.",
    "overheat protection": "Built-in safeguards prevent overheating.",
    "compact design": "Half the size of a standard adapter.",
    "travel friendly": "Light enough for any bag.",
    "multi device": "Switch between devices at the touch of a key.",
    "stereo sound": "Rich, room-filling audio.",
    "hands free calling": "Take calls right from the unit.",
    "usb charging": "Top up from any USB port.",
    "pairs two speakers": "Link a second unit for true stereo.",
    "shockproof": "Survives bumps and drops on the go.",
    "carry strap": "Hang it from a bag, a branch or a bike.",
    "full hd": "A sharp 1080p picture.",
    "ultra hd": "A crisp 4K picture with fine detail.",
    "eye care": "Flicker control and a low blue light mode ease eye strain.",
    "vesa mount": "Mounts on a wall or a monitor arm.",
    "high refresh rate": "Smooth motion in fast scenes.",
    "hdmi port": "Plug in a laptop, a console or a streaming box.",
    "ips panel": "True colors from wide viewing angles.",
    "built in speakers": "Sound without extra gear.",
    "frameless design": "Thin bezels for a seamless multi-screen setup.",
    "adaptive sync": "Tear-free frames in games.",
    "rechargeable battery": "Charge it once and type for weeks.",
    "quiet keys": "Soft keystrokes that will not disturb others.",
    "backlit keys": "Type in the dark with adjustable lighting.",
    "plug and play": "No drivers or setup needed.",
    "mechanical switches": "Crisp, tactile keystrokes.",
    "number pad": "A full numeric keypad for spreadsheets.",
    "spill resistant": "Survives an accidental splash of coffee.",
    "low profile": "Flat keys reduce wrist strain.",
    "heart rate": "Monitors your pulse around the clock.",
    "sleep tracking": "Reports your sleep stages each morning.",
    "step counter": "Counts steps, distance and calories.",
    "touch screen": "A bright, responsive color display.",
    "message notifications": "Never miss a text or a call.",
    "gps tracking": "Maps your route without a phone.",
    "blood oxygen": "Spot checks your oxygen levels.",
    "magnetic charger": "Snaps on to charge.",
    "tempered glass": "Hardened glass takes the hits instead of your screen.",
    "bubble free": "Goes on without trapped air.",
    "case friendly": "Leaves room for most cases.",
    "high definition": "Keeps the display crisp and clear.",
    "easy installation": "Put it on in under a minute.",
    "anti fingerprint": "An oil-repellent coating keeps smudges away.",
    "privacy filter": "Hides your screen from side glances.",
    "full coverage": "Covers the whole display edge to edge.",
}

# --- names and phrasing -----------------------------------------------------------------------

BRAND_HEADS = (
    "Vel", "Nor", "Quin", "Zar", "Lum", "Ash", "Bri", "Cor", "Dax", "Elm", "Fen", "Gal", "Hal",
    "Ives", "Jun", "Kai", "Lor", "Mav", "Nex", "Oak", "Pax", "Rho", "Sol", "Tor", "Ula", "Vin",
    "Wren", "Yor", "Zen", "Aria", "Bel", "Cal", "Del", "Evo", "Fin", "Gro", "Hue", "Ion", "Kor",
    "Lyn", "Mir", "Nova", "Opa", "Pim", "Ril", "Sku", "Tav", "Vox", "Wyl", "Xan",
)  # fmt: skip
BRAND_TAILS = (
    "ora", "ex", "ify", "ly", "ano", "eon", "ia", "ix", "um", "ova", "ari", "ette", "ino", "os",
    "ara", "ic", "yn", "ea", "io", "oro",
)  # fmt: skip
BRAND_WORDS: dict[str, tuple[str, ...]] = {
    "fashion": ("Apparel", "Wear", "Threads", "Studio", "& Co", "Outfitters", "Collective"),
    "food": ("Farms", "Kitchen", "Harvest", "Provisions", "Naturals", "Roasters", "Pantry"),
    "beauty": ("Beauty", "Botanics", "Labs", "Skin", "Cosmetics", "Naturals", "Glow"),
    "furniture": ("Home", "Living", "Furniture", "Woodworks", "Interiors", "Design", "Decor"),
    "electronics": ("Tech", "Audio", "Labs", "Digital", "Electronics", "Power", "Gear"),
}
CONSONANTS = "BCDFGHJKLMNPRSTVWXYZ"
VOWELS = "AEIOU"

OPENERS = (
    "i need", "i am looking for", "i'm looking for", "i want", "i would like", "find me",
    "can you find me", "i'm searching for", "looking for", "i want to buy", "i'd like to get",
    "please find", "get me", "i need to buy", "show me", "help me find",
)  # fmt: skip
SYNTHETIC_OPENERS = ("i want", "i need", "find me", "i am looking for", "i would like")
RECIPIENTS: dict[str, tuple[str, ...]] = {
    "fashion": ("for my husband", "for my wife", "for my son", "for my daughter", "for work"),
    "food": ("for my office", "for a party", "for my family", "for road trips"),
    "beauty": ("for my wife", "for my mom", "as a gift", "for my sister"),
    "furniture": ("for my apartment", "for my new house", "for my kids' room"),
    "electronics": ("for my son", "for travel", "for my dad", "for the office"),
}

# Whether a plain attribute reads as an adjective ("a shirt that is machine wash") or as a
# noun phrase ("bar stools with metal legs") after the noun; decided by its words.
ADJECTIVE_FIRST_WORDS = frozenset(
    "low high non anti zero no easy fast quick long short slim relaxed oversized highly heavy "
    "single travel straight multi extra".split()
)
ADJECTIVE_LAST_WORDS = frozenset(
    "free friendly proof resistant safe lasting absorbing drying wicking slip gmo organic "
    "certified tested lined wrapped braided cooked roasted fed flushed based pigmented greasy "
    "toxic calorie compatible duty saving wash dry assemble apply clean up on off aging "
    "cancelling shockproof waterproof bootcut trade origin batch grade speed definition century "
    "serve healthy needed fit hd sodium length spectrum play".split()
)
NOUN_LAST_WORDS = frozenset("life rate fillers sweeteners sugar calories".split())


def is_adjectival(phrase: str) -> bool:
    """Whether ``phrase`` reads as an adjective ("gluten free") rather than a noun phrase."""
    words = phrase.split()
    if words[-1] in NOUN_LAST_WORDS:
        return False
    return words[-1] in ADJECTIVE_LAST_WORDS or words[0] in ADJECTIVE_FIRST_WORDS


# Single-word attributes written apart in product texts; None: no other spelling.
_SPLIT_SPELLINGS = {
    "waterproof": "water-proof",
    "shockproof": "shock-proof",
    "bootcut": "boot-cut",
    "footrest": "foot-rest",
    "kickstand": "kick-stand",
}


# Spellings the rules below would get wrong.
_VARIANT_OVERRIDES: dict[str, str | None] = {
    "auto shut off": "auto shut-off",
    "baking soda free": "baking soda-free",
    "bpa free cans": "bpa-free cans",
    "usda organic": "usda certified organic",
    "zero calories": "zero-calorie",
    "easy installation": "easy to install",
    "mechanical switches": "mechanical switch",
    "plantar fasciitis": None,
    "pairs two speakers": None,
    "all hair types": None,
    "travel case": None,
}


def surface_variant(phrase: str) -> str | None:
    """Another way a product text writes ``phrase``: the same search words but not the phrase
    itself, so the reward's substring test does not find it. Compound adjectives take a
    hyphen ("non-slip", "easy to clean", "built-in microphone", "plug-and-play"), plural noun
    phrases the singular ("side pocket"). None if there is no natural other spelling."""
    if phrase in _VARIANT_OVERRIDES:
        return _VARIANT_OVERRIDES[phrase]
    words = phrase.split()
    if len(words) == 1:
        return _SPLIT_SPELLINGS.get(phrase)
    if words[0] == "easy":
        return "easy to " + " ".join(words[1:])
    if words[:2] == ["built", "in"]:
        return "built-in " + " ".join(words[2:])
    if "and" in words:
        return "-".join(words)
    if is_adjectival(phrase):
        if words[0] == "no" and len(words) > 2:
            return None
        return f"{words[0]}-{' '.join(words[1:])}"
    last = words[-1]
    if len(last) > 3 and last.endswith("s") and not last.endswith("ss"):
        if last.endswith("lves"):
            singular = last[:-3] + "f"
        elif last.endswith("ies"):
            singular = last[:-3] + "y"
        else:
            singular = last[:-1]
        return " ".join([*words[:-1], singular])
    return None


# Phrasings of one chosen option value by kind; {v} is the lower-cased value.
OPTION_PHRASES: dict[str, tuple[str, ...]] = {
    "color": ("in {v} color", "in {v}", "{v} color", "in the color {v}"),
    "size": ("in size {v}", "size {v}", "{v} size", "in {v}"),
    "flavor": ("in {v} flavor", "{v} flavor", "with {v} flavor", "in the {v} flavor"),
    "scent": ("in {v} scent", "{v} scent", "with a {v} scent"),
    "count": ("{v}", "{v}", "in {v}"),
    "style": ("in {v} style", "{v} style", "in {v}"),
    "material": ("in {v}", "made of {v}", "{v} material"),
    "device": ("for {v}", "for my {v}", "compatible with {v}"),
}

# Openers of descriptions; they read right for singular and plural nouns alike.
INTROS: tuple[str, ...] = (
    "Meet the {brand} {noun}.",
    "Upgrade your routine with the {brand} {noun}.",
    "Say hello to your new favorite {noun}.",
    "From {brand}, a name our customers trust.",
    "Thoughtfully made by {brand} and built to be loved.",
    "Designed by {brand} with real customers in mind.",
)
CLOSERS: dict[str, tuple[str, ...]] = {
    "fashion": (
        "Makes a great gift for birthdays and holidays.",
        "If it does not fit, exchanges are quick and free.",
        "Designed in California and made with care.",
    ),
    "food": (
        "Enjoy it at home, at work or on the go.",
        "Proudly packed in the USA.",
        "Our customers reorder it again and again.",
    ),
    "beauty": (
        "For external use only.",
        "Loved by beauty editors and everyday users alike.",
        "Made in a certified facility in the USA.",
    ),
    "furniture": (
        "Backed by a one-year manufacturer warranty.",
        "Our support team is happy to help with setup.",
        "Ships in sturdy packaging to arrive safe and sound.",
    ),
    "electronics": (
        "Backed by an 18-month warranty and friendly support.",
        "Everything you need is in the box.",
        "Certified for safety and performance.",
    ),
}
