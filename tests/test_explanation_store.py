"""The explanation store and its keys: what makes two explanations the same one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.decide.verdict import VerdictKind
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.explain.store import ABSENT_FOR_MS, SqliteExplanationStore, StoredExplanation
from worthit.explain.store_key import explanation_key as key_of
from worthit.explain.store_key import model_identity
from worthit.market.store import MarketStore

from factories import make_reason, make_stored, make_verdict

POLICY = "best-of-4"
WAIT_TEXT = "Better to wait because a sale is near."


def entry(key: str, text: str | None = WAIT_TEXT) -> StoredExplanation:
    return make_stored(key=key, text=text)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        self.ms += 1
        return self.ms


def inputs(**overrides: object) -> tuple[list[dict[str, str]], str]:
    """The prompt (messages, answer prefix) of these inputs."""
    made = ExplanationInputs.of("Lumina 55U8 4K Smart TV", make_verdict(**overrides))
    return build_messages(made), answer_prefix(made)


def explanation_key(model: str, prompt: tuple[list[dict[str, str]], str], sampling: str) -> str:
    return key_of(model, *prompt, sampling)


def test_the_same_inputs_give_the_same_key_and_any_change_a_new_one() -> None:
    base = explanation_key("m@1", inputs(), POLICY)
    assert explanation_key("m@1", inputs(), POLICY) == base
    assert explanation_key("m@2", inputs(), POLICY) != base  # another model file
    assert explanation_key("m@1", inputs(), "greedy") != base  # another sampling policy
    assert explanation_key("m@1", inputs(kind=VerdictKind.BUY), POLICY) != base
    assert explanation_key("m@1", inputs(language="zh"), POLICY) != base
    moved = inputs(reasons=(make_reason(text="A sale at 249.00 USD starts in 6.5 days."),))
    assert explanation_key("m@1", moved, POLICY) != base


def test_the_model_identity_is_the_files_content_not_its_name(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf", tmp_path / "c" / "m.gguf"
    for path, filler in ((a, b"x"), (b, b"x"), (c, b"y")):
        path.parent.mkdir()
        path.write_bytes(b"GGUF" + filler * 100)
    assert model_identity(a) == model_identity(b) != model_identity(c)
    assert model_identity(a).startswith("m.gguf@")


def test_an_adapter_is_part_of_the_model_identity(tmp_path: Path) -> None:
    """Text the bare model wrote is never served as the adapter's, nor the reverse."""
    base, lora, other = tmp_path / "m.gguf", tmp_path / "l.gguf", tmp_path / "k.gguf"
    base.write_bytes(b"GGUF" + b"m" * 100)
    lora.write_bytes(b"GGUF" + b"l" * 100)
    other.write_bytes(b"GGUF" + b"k" * 100)
    bare, tuned = model_identity(base), model_identity(base, lora)
    assert tuned.startswith(bare + "+l.gguf@")
    assert len({bare, tuned, model_identity(base, other)}) == 3
    assert explanation_key(bare, inputs(), POLICY) != explanation_key(tuned, inputs(), POLICY)


def test_the_store_keeps_entries_across_a_restart(market_db: str) -> None:
    path = market_db
    store = SqliteExplanationStore(path)
    store.put(entry("k1"))
    store.put(entry("k2", text=None))
    store.close()
    again = SqliteExplanationStore(path)
    assert len(again) == 2
    kept = again.get("k1")
    assert kept is not None and kept.text == entry("k1").text and kept.tries == 2
    failed = again.get("k2")
    assert failed is not None and failed.failed
    assert again.get("nope") is None
    assert again.text_bytes() == len(entry("k1").text.encode())  # type: ignore[union-attr]
    again.close()


def test_a_products_newest_text_is_found_whatever_inputs_it_was_written_for(
    market_db: str,
) -> None:
    """What a shopper's miss may fall back to: this model's newest kept text for the
    product, language and verdict; a failed entry, another model's, language's, verdict's
    or product's text is not it."""
    store = SqliteExplanationStore(market_db)
    store.put(make_stored(key="old", generated_at_ms=1_000, text="Better to wait because old."))
    store.put(make_stored(key="new", generated_at_ms=2_000))
    store.put(make_stored(key="failed", generated_at_ms=3_000, text=None))
    for other in ({"model": "m@2"}, {"language": "zh"}, {"verdict": "BUY"}, {"sku": "S3"}):
        store.put(make_stored(key=str(other), generated_at_ms=4_000, **other))
    found = store.latest("S2", "en", "m@1", "WAIT")
    assert found is not None and (found.key, found.text) == ("new", WAIT_TEXT)
    assert store.latest("S9", "en", "m@1", "WAIT") is None
    store.close()


def test_a_miss_is_remembered_briefly_and_forgotten_by_a_write(market_db: str) -> None:
    """A miss repeated within ABSENT_FOR_MS asks the database nothing (so another
    process's write is not seen yet); this store's own write is seen at once."""
    clock = Clock()
    reader = SqliteExplanationStore(market_db, clock=clock)
    writer = SqliteExplanationStore(market_db, clock=clock)  # another worker's store
    assert reader.get("k") is None
    writer.put(entry("k"))
    assert reader.get("k") is None  # remembered as missing
    clock.ms += ABSENT_FOR_MS
    seen = reader.get("k")
    assert seen is not None and seen.text == WAIT_TEXT
    assert reader.get("other") is None
    reader.put(entry("other"))
    assert reader.get("other") is not None
    assert reader.misses == 3
    reader.close()
    writer.close()


def test_the_store_is_bounded_least_recently_used_out_first(market_db: str) -> None:
    clock = Clock()
    store = SqliteExplanationStore(market_db, capacity=3, clock=clock)
    for key in ("a", "b", "c"):
        store.put(entry(key))
    assert store.get("a") is not None  # a is used again: b is now the oldest
    store.flush()
    store.put(entry("d"))
    assert len(store) == 3
    store.close()
    reopened = SqliteExplanationStore(market_db, capacity=3)
    assert {k for k in "abcd" if reopened.get(k) is not None} == {"a", "c", "d"}
    reopened.close()


def test_replacing_an_entry_keeps_the_count(market_db: str) -> None:
    store = SqliteExplanationStore(market_db)
    store.put(entry("a", text=None))
    store.put(entry("a"))
    assert len(store) == 1 and store.get("a") == store.get("a")
    got = store.get("a")
    assert got is not None and not got.failed
    store.close()


def test_the_store_shares_the_market_file_without_touching_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    MarketStore(path).close()
    before = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    SqliteExplanationStore(path).put(entry("a"))
    market = MarketStore(path)  # the market still opens: its schema is untouched
    assert market.count_products() == 0
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == before


def test_capacity_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="capacity"):
        SqliteExplanationStore(tmp_path / "m.db", capacity=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=40), st.integers(1, 5))
def test_the_bound_holds_whatever_the_order_of_puts(
    tmp_path_factory: pytest.TempPathFactory, keys: list[str], capacity: int
) -> None:
    store = SqliteExplanationStore(tmp_path_factory.mktemp("s") / "m.db", capacity=capacity)
    for key in keys:
        store.put(entry(key))
        assert len(store) <= capacity
    assert store.get(keys[-1]) is not None  # the newest is never the one evicted
    store.close()
