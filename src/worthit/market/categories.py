"""The demo market's categories and the words shoppers use for them, in English, Chinese
and Japanese.

The simulator draws from this table and the intent parser reads it, so a question about
"降噪耳机" lands on the same category the simulator filled.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    key: str
    en: str
    zh: str
    synonyms_en: tuple[str, ...]
    synonyms_zh: tuple[str, ...]
    price_range: tuple[float, float]


CATEGORIES: tuple[Category, ...] = (
    Category(
        "headphones",
        "headphones",
        "耳机",
        (
            "headphones",
            "headphone",
            "earbuds",
            "earphones",
            "headset",
            "noise-cancelling headphones",
            "noise cancelling headphones",
            "anc headphones",
        ),
        ("耳机", "降噪耳机", "蓝牙耳机", "无线耳机", "耳麦"),
        (39.0, 449.0),
    ),
    Category(
        "phones",
        "smartphones",
        "手机",
        ("phone", "phones", "smartphone", "smartphones", "mobile", "cellphone"),
        ("手机", "智能手机"),
        (149.0, 1299.0),
    ),
    Category(
        "laptops",
        "laptops",
        "笔记本电脑",
        ("laptop", "laptops", "notebook", "notebooks", "ultrabook"),
        ("笔记本", "笔记本电脑", "电脑"),
        (399.0, 2499.0),
    ),
    Category(
        "tvs",
        "TVs",
        "电视",
        ("tv", "tvs", "television", "televisions"),
        ("电视", "电视机", "智能电视"),
        (199.0, 2999.0),
    ),
    Category(
        "coffee",
        "coffee machines",
        "咖啡机",
        ("coffee machine", "coffee machines", "coffee maker", "coffee makers", "espresso machine"),
        ("咖啡机", "咖啡壶"),
        (49.0, 899.0),
    ),
    Category(
        "vacuums",
        "vacuum cleaners",
        "吸尘器",
        ("vacuum", "vacuums", "vacuum cleaner", "vacuum cleaners", "robot vacuum"),
        ("吸尘器", "扫地机器人", "扫地机"),
        (79.0, 999.0),
    ),
    Category(
        "watches",
        "smartwatches",
        "智能手表",
        ("smartwatch", "smartwatches", "watch", "watches", "fitness tracker"),
        ("智能手表", "手表", "手环"),
        (49.0, 799.0),
    ),
    Category(
        "cameras",
        "cameras",
        "相机",
        ("camera", "cameras", "mirrorless camera", "action camera"),
        ("相机", "照相机", "微单", "运动相机"),
        (149.0, 2999.0),
    ),
    Category(
        "speakers",
        "speakers",
        "音箱",
        ("speaker", "speakers", "bluetooth speaker", "smart speaker", "soundbar"),
        ("音箱", "音响", "蓝牙音箱", "智能音箱"),
        (29.0, 699.0),
    ),
    Category(
        "keyboards",
        "keyboards",
        "键盘",
        ("keyboard", "keyboards", "mechanical keyboard"),
        ("键盘", "机械键盘"),
        (29.0, 299.0),
    ),
    Category(
        "monitors",
        "monitors",
        "显示器",
        ("monitor", "monitors", "display", "displays"),
        ("显示器", "屏幕"),
        (119.0, 1499.0),
    ),
    Category(
        "blenders",
        "blenders",
        "破壁机",
        ("blender", "blenders", "juicer", "food processor"),
        ("破壁机", "榨汁机", "料理机"),
        (29.0, 599.0),
    ),
    Category(
        "shoes",
        "running shoes",
        "跑鞋",
        ("running shoes", "running shoe", "sneakers", "shoes", "trainers"),
        ("跑鞋", "运动鞋", "跑步鞋", "鞋"),
        (49.0, 249.0),
    ),
)

BY_KEY: dict[str, Category] = {c.key: c for c in CATEGORIES}

JAPANESE: dict[str, tuple[str, tuple[str, ...]]] = {
    "headphones": (
        "ヘッドホン",
        ("ヘッドホン", "ヘッドフォン", "イヤホン", "ノイズキャンセリングヘッドホン"),
    ),
    "phones": ("スマートフォン", ("スマートフォン", "スマホ", "携帯")),
    "laptops": ("ノートパソコン", ("ノートパソコン", "ノートPC", "パソコン")),
    "tvs": ("テレビ", ("テレビ", "TV")),
    "coffee": ("コーヒーメーカー", ("コーヒーメーカー", "エスプレッソマシン", "コーヒーマシン")),
    "vacuums": ("掃除機", ("掃除機", "ロボット掃除機", "クリーナー")),
    "watches": ("スマートウォッチ", ("スマートウォッチ", "腕時計")),
    "cameras": ("カメラ", ("カメラ", "ミラーレス", "アクションカメラ")),
    "speakers": ("スピーカー", ("スピーカー", "サウンドバー")),
    "keyboards": ("キーボード", ("キーボード",)),
    "monitors": ("モニター", ("モニター", "ディスプレイ")),
    "blenders": ("ミキサー", ("ミキサー", "ブレンダー", "ジューサー")),
    "shoes": ("ランニングシューズ", ("ランニングシューズ", "スニーカー", "靴")),
}
"""Per category key: its Japanese name and the words Japanese shoppers use for it."""


def category_name(category: Category | None, language: str) -> str:
    """The category as a shopper reading `language` calls it ("products" for none)."""
    if category is None:
        return {"zh": "商品", "ja": "商品"}.get(language, "products")
    if language == "zh":
        return category.zh
    if language == "ja":
        return JAPANESE.get(category.key, (category.en, ()))[0]
    return category.en


def synonyms(category: Category) -> tuple[str, ...]:
    """Every word for the category, in every language the intent parser reads."""
    return (*category.synonyms_en, *category.synonyms_zh, *JAPANESE.get(category.key, ("", ()))[1])
