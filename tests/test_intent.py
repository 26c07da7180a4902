"""Intent parsing: the question table shoppers actually type, slot tables, and properties.

The table pins whole intents for the phrasings the product promises to understand; the
properties make sure any text at all (control characters, huge input) yields a valid
Intent whose mentions were cut from the question, never invented.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.decide.intent import (
    MAX_QUESTION_CHARS,
    Intent,
    IntentKind,
    normalise,
    parse_intent,
)
from worthit.market.categories import BY_KEY

W, C, T, B, U = (
    IntentKind.WORTH_BUYING,
    IntentKind.COMPARE,
    IntentKind.TOP_N,
    IntentKind.WAIT_OR_BUY,
    IntentKind.UNKNOWN,
)

# (question, kind, language, mentions, other expected fields)
QUESTIONS: list[tuple[str, IntentKind, str, tuple[str, ...], dict[str, Any]]] = [
    # worth_buying
    ("Is the Aurora NC700 worth buying?", W, "en", ("Aurora NC700",), {}),
    ("Should I buy the Aurora NC700?", W, "en", ("Aurora NC700",), {}),
    ("Aurora NC700 — good deal?", W, "en", ("Aurora NC700",), {}),
    ("is NC700 a good price right now", W, "en", ("NC700",), {}),
    ("极光NC700值不值得买", W, "zh", ("极光NC700",), {}),
    ("极光NC700值得买吗？", W, "zh", ("极光NC700",), {}),
    ("NC700现在入手划算吗", W, "zh", ("NC700",), {}),
    ("Aurora NC700", W, "en", ("Aurora NC700",), {}),
    (
        "Is the Sony WH-1000XM5 worth it under $400?",
        W,
        "en",
        ("Sony WH-1000XM5",),
        {"budget": 400.0},
    ),
    ("京东上的极光NC700值得买吗", W, "zh", ("极光NC700",), {}),
    ("Is NC700 worth it or not?", W, "en", ("NC700",), {}),
    ("Is the Aurora NC700 worth buying for my son?", W, "en", ("Aurora NC700",), {}),
    ("Aurora\tNC700\x00 worth it?", W, "en", ("Aurora NC700",), {}),
    ("Is the Galaxy S24+ a good deal?", W, "en", ("Galaxy S24+",), {}),
    ("Xbox One worth it?", W, "en", ("Xbox One",), {}),
    ("热销的NC700值得买吗", W, "zh", ("NC700",), {}),
    ("Are these headphones worth it?", W, "en", (), {"category": "headphones"}),
    ("值不值得买", W, "zh", (), {}),
    # wait_or_buy
    ("Should I wait for the sale on the Aurora NC700?", B, "en", ("Aurora NC700",), {}),
    ("Buy the NC700 now or wait?", B, "en", ("NC700",), {}),
    ("will the NC700 get cheaper", B, "en", ("NC700",), {}),
    ("Buy NC700 now or later?", B, "en", ("NC700",), {}),
    ("is it a good time to buy the NC700", B, "en", ("NC700",), {}),
    ("NC700要不要等双十一", B, "zh", ("NC700",), {}),
    ("NC700现在买还是等等", B, "zh", ("NC700",), {}),
    ("NC700会降价吗", B, "zh", ("NC700",), {}),
    # compare
    ("Aurora NC700 or Kestrel Q5?", C, "en", ("Aurora NC700", "Kestrel Q5"), {}),
    ("Is the Aurora NC700 or the Kestrel Q5 better?", C, "en", ("Aurora NC700", "Kestrel Q5"), {}),
    ("Aurora NC700 vs Kestrel Q5", C, "en", ("Aurora NC700", "Kestrel Q5"), {}),
    ("NC700 vs Q5", C, "en", ("NC700", "Q5"), {}),
    ("Which is better, the NC700 or the Q5?", C, "en", ("NC700", "Q5"), {}),
    ("Which is cheaper, NC700 or Q5?", C, "en", ("NC700", "Q5"), {}),
    ("Is the NC700 better than the Q5?", C, "en", ("NC700", "Q5"), {}),
    ("compare NC700 with Q5", C, "en", ("NC700", "Q5"), {}),
    ("the NC700 vs. the Q5 vs. the X9", C, "en", ("NC700", "Q5", "X9"), {}),
    ("B&O Beoplay H95 vs Sony WH-1000XM5", C, "en", ("B&O Beoplay H95", "Sony WH-1000XM5"), {}),
    ("NC700和Q5哪个好", C, "zh", ("NC700", "Q5"), {}),
    ("NC700还是Q5", C, "zh", ("NC700", "Q5"), {}),
    ("极光NC700还是Kestrel Q5", C, "zh", ("极光NC700", "Kestrel Q5"), {}),
    ("小米和华为哪个好", C, "zh", ("小米", "华为"), {}),
    ("NC700跟Q5比哪个更值", C, "zh", ("NC700", "Q5"), {}),
    # top_n
    (
        "top 3 noise-cancelling headphones by sales in the last 3 days",
        T,
        "en",
        (),
        {"category": "headphones", "metric": "sales", "window_days": 3, "n": 3},
    ),
    (
        "best-selling laptops this week",
        T,
        "en",
        (),
        {"category": "laptops", "metric": "sales", "window_days": 7, "n": None},
    ),
    ("highest rated coffee machines", T, "en", (), {"category": "coffee", "metric": "rating"}),
    (
        "the top three smartwatches by rating over the last two weeks",
        T,
        "en",
        (),
        {"category": "watches", "metric": "rating", "window_days": 14, "n": 3},
    ),
    ("best headphones under $300", T, "en", (), {"category": "headphones", "budget": 300.0}),
    (
        "最近三天销量TOP3的降噪耳机",
        T,
        "zh",
        (),
        {"category": "headphones", "metric": "sales", "window_days": 3, "n": 3},
    ),
    (
        "最近三天京东上销量TOP3的降噪耳机",
        T,
        "zh",
        (),
        {"category": "headphones", "metric": "sales", "window_days": 3, "n": 3},
    ),
    (
        "近一周评分最高的手机前五",
        T,
        "zh",
        (),
        {"category": "phones", "metric": "rating", "window_days": 7, "n": 5},
    ),
    (
        "300以内的降噪耳机哪个卖得最好",
        T,
        "zh",
        (),
        {"category": "headphones", "metric": "sales", "budget": 300.0},
    ),
    (
        "预算3千的笔记本电脑评分最高前三",
        T,
        "zh",
        (),
        {"category": "laptops", "metric": "rating", "budget": 3000.0, "n": 3},
    ),
    ("ＴＯＰ３ 手机", T, "zh", (), {"category": "phones", "n": 3}),
    ("前三天销量最高的手机", T, "zh", (), {"category": "phones", "n": None}),
    # unknown
    ("", U, "en", (), {}),
    ("   \t\n", U, "en", (), {}),
    ("hello", U, "en", (), {}),
    ("what's the weather", U, "en", (), {}),
    ("你好", U, "zh", (), {}),
    ("asdfgh", U, "en", (), {}),
    ("tea or coffee", U, "en", (), {}),
]


@pytest.mark.parametrize(
    ("question", "kind", "language", "mentions", "fields"),
    QUESTIONS,
    ids=[q[0] or "<empty>" for q in QUESTIONS],
)
def test_question_table(
    question: str,
    kind: IntentKind,
    language: str,
    mentions: tuple[str, ...],
    fields: dict[str, Any],
) -> None:
    intent = parse_intent(question)
    assert (intent.kind, intent.language, intent.mentions) == (kind, language, mentions)
    for name, expected in fields.items():
        assert getattr(intent, name) == expected, name
    assert intent.raw == question


@pytest.mark.parametrize(
    ("question", "window_days"),
    [
        ("best-selling phones in the last 3 days", 3),
        ("top rated phones over the past week", 7),
        ("best-selling phones this month", 30),
        ("best-selling phones in the last 30 days", 30),
        ("最近三天热销的手机", 3),
        ("近7天热销的手机", 7),
        ("过去一周热销的手机", 7),
        ("近一个月热销的手机", 30),
        ("本月热销的手机", 30),
        ("最近两周热销的手机", 14),
        ("近十五天热销的手机", 15),
        ("近日热销的手机", None),
        ("best-selling phones", None),
    ],
)
def test_window_days(question: str, window_days: int | None) -> None:
    assert parse_intent(question).window_days == window_days


@pytest.mark.parametrize(
    ("question", "n"),
    [
        ("top 3 phones", 3),
        ("top three phones", 3),
        ("best 5 phones", 5),
        ("the 10 most popular phones", 10),
        ("手机前三", 3),
        ("手机前5名", 5),
        ("手机TOP3", 3),
        ("手机销量前十", 10),
        ("目前最畅销的手机", None),
    ],
)
def test_top_n_count(question: str, n: int | None) -> None:
    intent = parse_intent(question)
    assert intent.kind is IntentKind.TOP_N
    assert intent.n == n


@pytest.mark.parametrize(
    ("question", "budget"),
    [
        ("headphones under $300", 300.0),
        ("headphones below 300 dollars", 300.0),
        ("laptops less than 1,299", 1299.0),
        ("laptops under 1.5k", 1500.0),
        ("300以内的耳机", 300.0),
        ("预算500的耳机", 500.0),
        ("500元以下的耳机", 500.0),
        ("不超过800的耳机", 800.0),
        ("预算1万的笔记本", 10000.0),
        ("top 3 phones within 3 days", None),
        ("不到3天卖出的手机", None),
        ("NC700以内", None),
        # a measure is not a price
        ("best laptops under 2 kg", None),
        ("laptops under 2kg", None),
        ("best TVs under 55 inches", None),
        ("best TVs under 55-inch", None),
        ('monitors under 27"', None),
        ("power banks under 20000 mAh", None),
        ("chargers under 100W", None),
        ("headphones under 200 grams", None),
        ("keyboards under 20 ms latency", None),
        ("500克以内的耳机", None),
        ("不超过2公斤的笔记本", None),
        # a resolution in a product's name is not a price either
        ("Is the Lumina 55U7 Max 4K Smart TV worth buying?", None),
        ("TVs under 4K UHD", None),
        ("best TVs under 4k", 4000.0),
        ("monitors max 4k dollars", 4000.0),
        ("an OLED TV under 500 OLED", 500.0),
    ],
)
def test_budget(question: str, budget: float | None) -> None:
    assert parse_intent(question).budget == budget


@pytest.mark.parametrize(
    ("question", "category"),
    [
        ("noise-cancelling headphones worth it?", "headphones"),
        ("noise cancelling headphones worth it?", "headphones"),
        ("降噪耳机值得买吗", "headphones"),
        ("笔记本电脑推荐", "laptops"),
        ("best espresso machines", "coffee"),
        ("扫地机器人热销", "vacuums"),
        ("iPhone 15 worth it?", None),  # "phone" inside a word is not the category
    ],
)
def test_category_longest_synonym(question: str, category: str | None) -> None:
    assert parse_intent(question).category == category


def test_intent_is_immutable() -> None:
    intent = parse_intent("NC700 vs Q5")
    with pytest.raises(dataclasses.FrozenInstanceError):
        intent.kind = IntentKind.UNKNOWN  # type: ignore[misc]


def test_input_beyond_the_cap_is_ignored() -> None:
    question = "Is the Aurora NC700 worth buying?"
    padded = question.ljust(MAX_QUESTION_CHARS) + " vs Kestrel Q5" * 1000
    assert dataclasses.replace(parse_intent(padded), raw=question) == parse_intent(question)


# --- properties ----------------------------------------------------------------------------

_FRAGMENTS = [
    "Is the ",
    "Aurora NC700",
    "Q5",
    " worth buying",
    "?",
    " or ",
    " vs ",
    "top 3 ",
    "最近三天",
    "销量",
    "TOP3",
    "的",
    "降噪耳机",
    "值得买吗",
    "和",
    "还是",
    "哪个好",
    "wait",
    "等等",
    "under $300",
    "300以内",
    "前五",
    " ",
    "\x00",
    "\t",
    "\u200b",
    "ＴＯＰ",
    "—",
    "1,299",
]
_QUESTIONS = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join),
    st.builds(lambda s, k: s * k, st.text(min_size=1, max_size=20), st.integers(20, 300)),
)


def _assert_valid(intent: Intent, question: str) -> None:
    assert isinstance(intent.kind, IntentKind)
    assert intent.language in ("en", "zh", "ja")
    assert intent.raw == question
    assert intent.category is None or intent.category in BY_KEY
    assert intent.metric in (None, "sales", "rating")
    assert intent.window_days is None or intent.window_days > 0
    assert intent.n is None or intent.n > 0
    assert intent.budget is None or (intent.budget > 0 and math.isfinite(intent.budget))
    if intent.kind is IntentKind.COMPARE:
        assert len(intent.mentions) >= 2
    elif intent.kind in (IntentKind.WORTH_BUYING, IntentKind.WAIT_OR_BUY):
        assert len(intent.mentions) <= 1
    else:
        assert intent.mentions == ()
    text = normalise(question)
    for mention in intent.mentions:
        assert mention and mention == mention.strip()
        assert mention in text


@settings(max_examples=300)
@given(_QUESTIONS)
def test_any_text_gives_a_valid_intent(question: str) -> None:
    _assert_valid(parse_intent(question), question)


_CODES = st.from_regex(r"[A-Z]{2}[0-9]{2,4}", fullmatch=True)


@given(_CODES)
def test_model_codes_survive_intact(code: str) -> None:
    assert parse_intent(f"Is the {code} worth buying?").mentions == (code,)
    assert parse_intent(f"{code}值不值得买").mentions == (code,)
    assert parse_intent(f"Should I wait for the {code} to go on sale?").mentions == (code,)


@given(_CODES, _CODES)
def test_compare_keeps_both_codes(first: str, second: str) -> None:
    intent = parse_intent(f"{first} vs {second}")
    if first == second:
        assert intent.kind is not IntentKind.COMPARE
    else:
        assert (intent.kind, intent.mentions) == (IntentKind.COMPARE, (first, second))
