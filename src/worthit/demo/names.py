"""Invented brands and product names for the demo market, in English and Chinese.

Shoppers name a product by brand and model ("Aurora NC700"), by the model alone
("NC700") or in Chinese ("极光NC700降噪耳机"), so every product carries all three forms
as aliases: product resolution is only as good as the names it is exercised against.
Brands are invented so that no answer about the demo market reads as a claim about a
real company.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

_MAX_DRAWS = 20
"""Random draws before a colliding model code gets a numeric tail instead; bounds the loop."""


@dataclass(frozen=True)
class Brand:
    en: str
    zh: str


@dataclass(frozen=True)
class Kind:
    """What a product is within its category; its title ends with `en`, its Chinese alias with `zh`.

    `features` become product attributes, so that the title's promise ("Noise Cancelling")
    and the attributes a comparison reads never disagree.
    """

    en: str
    zh: str
    features: Mapping[str, str | int | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class ProductName:
    brand: Brand
    model: str
    kind: Kind

    @property
    def title(self) -> str:
        return f"{self.brand.en} {self.model} {self.kind.en}"

    @property
    def aliases(self) -> list[str]:
        return [
            self.model,
            f"{self.brand.zh}{self.model}",
            f"{self.brand.zh}{self.model}{self.kind.zh}",
        ]


@dataclass(frozen=True)
class _Style:
    """How one category names its products: kinds, model-code prefixes and numbers."""

    kinds: tuple[Kind, ...]
    prefixes: tuple[str, ...]
    numbers: tuple[int, ...]


BRANDS: tuple[Brand, ...] = (
    Brand("Aurora", "极光"),
    Brand("Nordvik", "诺维克"),
    Brand("Kestrel", "红隼"),
    Brand("Halden", "海登"),
    Brand("Lumina", "流明"),
    Brand("Vantor", "万拓"),
    Brand("Cobalt", "钴蓝"),
    Brand("Meridian", "子午"),
    Brand("Solace", "素语"),
    Brand("Tidewell", "潮汐"),
    Brand("Pinecrest", "松岭"),
    Brand("Orbitek", "轨科"),
    Brand("Zephyr", "西风"),
    Brand("Ember", "余烬"),
    Brand("Quill", "羽笔"),
    Brand("Stratus", "层云"),
)

_SUFFIXES = ("", "", "", " Pro", " Max", " Lite", " Plus")

_STYLES: dict[str, _Style] = {
    "headphones": _Style(
        (
            Kind("Wireless Headphones", "无线耳机", {"wireless": True}),
            Kind(
                "Noise Cancelling Headphones",
                "降噪耳机",
                {"wireless": True, "noise_cancelling": True},
            ),
            Kind("True Wireless Earbuds", "真无线耳机", {"wireless": True, "in_ear": True}),
            Kind("Studio Headphones", "监听耳机", {"wireless": False}),
        ),
        ("NC", "WH", "Q", "BX", "Air"),
        (3, 5, 7, 20, 30, 45, 300, 500, 700, 900),
    ),
    "phones": _Style(
        (
            Kind("Smartphone", "手机", {"storage_gb": 128}),
            Kind("5G Smartphone", "5G手机", {"storage_gb": 256, "5g": True}),
        ),
        ("X", "Note ", "P", "Edge ", "A"),
        (8, 10, 12, 14, 15, 20, 50, 60),
    ),
    "laptops": _Style(
        (
            Kind("Laptop", "笔记本电脑", {"screen_in": 15}),
            Kind("Ultrabook", "轻薄本", {"screen_in": 14}),
            Kind("Gaming Laptop", "游戏本", {"screen_in": 16, "gaming": True}),
        ),
        ("Book ", "Air ", "G", "Flex ", "Z"),
        (13, 14, 15, 16, 360, 500, 700),
    ),
    "tvs": _Style(
        (
            Kind("4K Smart TV", "4K智能电视", {"resolution": "4K"}),
            Kind("QLED TV", "QLED电视", {"resolution": "4K", "panel": "QLED"}),
            Kind("OLED TV", "OLED电视", {"resolution": "4K", "panel": "OLED"}),
        ),
        ("43U", "50U", "55U", "65Q", "75Q"),
        (6, 7, 8, 9),
    ),
    "coffee": _Style(
        (
            Kind("Espresso Machine", "意式咖啡机", {"type": "espresso"}),
            Kind("Drip Coffee Maker", "滴滤咖啡机", {"type": "drip"}),
            Kind("Capsule Coffee Machine", "胶囊咖啡机", {"type": "capsule"}),
        ),
        ("BrewMaster ", "Barista ", "CM", "Crema "),
        (1, 2, 3, 5, 100, 300, 500),
    ),
    "vacuums": _Style(
        (
            Kind("Robot Vacuum", "扫地机器人", {"robot": True}),
            Kind("Cordless Stick Vacuum", "无线吸尘器", {"cordless": True}),
        ),
        ("R", "V", "S", "Swift "),
        (5, 7, 8, 10, 11, 12, 15),
    ),
    "watches": _Style(
        (
            Kind("Smartwatch", "智能手表", {"gps": True}),
            Kind("Fitness Tracker", "运动手环", {"gps": False}),
        ),
        ("Pulse ", "Fit ", "W", "Active "),
        (2, 3, 4, 5, 6, 7),
    ),
    "cameras": _Style(
        (
            Kind("Mirrorless Camera", "微单相机", {"sensor": "APS-C"}),
            Kind("Action Camera", "运动相机", {"waterproof": True}),
        ),
        ("M", "Z", "Hero ", "A"),
        (5, 6, 7, 9, 10, 50, 100),
    ),
    "speakers": _Style(
        (
            Kind("Bluetooth Speaker", "蓝牙音箱", {"portable": True}),
            Kind("Smart Speaker", "智能音箱", {"voice_assistant": True}),
            Kind("Soundbar", "回音壁", {"channels": "3.1"}),
        ),
        ("Boom ", "SB", "Echo ", "Wave "),
        (2, 3, 4, 5, 300, 700),
    ),
    "keyboards": _Style(
        (
            Kind("Mechanical Keyboard", "机械键盘", {"switches": "tactile"}),
            Kind("Wireless Keyboard", "无线键盘", {"wireless": True}),
        ),
        ("K", "MX", "TKL", "Type "),
        (60, 65, 75, 87, 100, 104),
    ),
    "monitors": _Style(
        (
            Kind("4K Monitor", "4K显示器", {"resolution": "4K"}),
            Kind("Gaming Monitor", "电竞显示器", {"refresh_hz": 165}),
            Kind("Ultrawide Monitor", "带鱼屏显示器", {"aspect": "21:9"}),
        ),
        ("U27", "G24", "UW34", "P32"),
        (0, 1, 2, 5, 8),
    ),
    "blenders": _Style(
        (
            Kind("High-Speed Blender", "破壁机", {"watts": 1400}),
            Kind("Personal Blender", "便携榨汁机", {"watts": 300}),
        ),
        ("Vortex ", "B", "Pro Blend ", "Mix "),
        (2, 3, 5, 600, 900, 1200),
    ),
    "shoes": _Style(
        (
            Kind("Running Shoes", "跑鞋", {"use": "road"}),
            Kind("Trail Running Shoes", "越野跑鞋", {"use": "trail"}),
        ),
        ("Glide ", "Strider ", "Tempo ", "Ridge "),
        (2, 3, 4, 5, 8, 10),
    ),
}


def brand(en: str) -> Brand:
    """The brand with this English name; a KeyError means a typo in a fixed product."""
    for candidate in BRANDS:
        if candidate.en == en:
            return candidate
    raise KeyError(en)


class Namer:
    """Draws names for one catalogue; a brand and model code are never reused within it.

    Uniqueness matters because two products both called "Aurora NC700" would make
    product resolution ambiguous in a way no real catalogue is.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._taken: set[tuple[str, str]] = set()

    def reserve(self, name: ProductName) -> ProductName:
        self._taken.add((name.brand.en, name.model))
        return name

    def name(self, category: str) -> ProductName:
        style = _STYLES[category]
        kind = self._rng.choice(style.kinds)
        owner = self._rng.choice(BRANDS)
        model = self._model(style)
        for _ in range(_MAX_DRAWS):
            if (owner.en, model) not in self._taken:
                return self.reserve(ProductName(owner, model, kind))
            owner, model = self._rng.choice(BRANDS), self._model(style)
        tail = 2
        while (owner.en, f"{model}-{tail}") in self._taken:
            tail += 1
        return self.reserve(ProductName(owner, f"{model}-{tail}", kind))

    def _model(self, style: _Style) -> str:
        prefix = self._rng.choice(style.prefixes)
        number = self._rng.choice(style.numbers)
        return f"{prefix}{number}{self._rng.choice(_SUFFIXES)}"
