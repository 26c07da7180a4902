"""The page's suggestions for a whole question typed in Chinese or Japanese, in headless
Chromium on the real service (issue 26: "极光NC700值不值得买" showed no suggestions), and
the language button going round English, Chinese and Japanese."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, sync_playwright
from test_page_browser import launch

from live_server import LiveServer
from service_fixtures import market_copy, open_service

__all__ = ["market_copy", "open_service"]

pytestmark = pytest.mark.slow


def suggestions_for(page: Page, typed: str) -> list[str]:
    page.fill("#q", typed)
    page.locator("#suggestions li").first.wait_for(timeout=20_000)
    return [item.get_attribute("data-sku") or "" for item in page.locator("#suggestions li").all()]


@pytest.mark.parametrize(
    "typed",
    ["极光NC700值不值得买", "Aurora NC700は買い時ですか", "极光", "Kestrel Q5"],
)
def test_a_question_in_any_language_suggests_the_product_it_names(
    open_service: LiveServer, typed: str
) -> None:
    expected = "S5" if "Q5" in typed else "S1"
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(open_service.base_url + "/")
        skus = suggestions_for(page, typed)
        browser.close()
    assert not errors
    assert skus[0] == expected, skus


def test_the_language_button_goes_round_english_chinese_japanese(
    open_service: LiveServer,
) -> None:
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(locale="en-US")
        page.goto(open_service.base_url + "/")
        seen = [page.get_attribute("html", "lang")]
        for _ in range(3):
            page.click("#lang")
            seen.append(page.get_attribute("html", "lang"))
        page.click("#lang")  # to Chinese again, then a Japanese question switches to Japanese
        page.fill("#q", "Aurora NC700は買い時ですか")
        page.press("#q", "Enter")
        page.wait_for_selector("#verdict[data-verdict]:not([data-verdict=''])", timeout=30_000)
        word = page.inner_text("#v-word")
        placeholder = page.get_attribute("#q", "placeholder")
        browser.close()
    assert seen == ["en", "zh-CN", "ja-JP", "en"]
    assert word == "今が買い時" and placeholder == "Aurora NC700は買い時ですか？"
