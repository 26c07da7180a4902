"""The shopper's page in headless Chromium (Debian's, driven by Playwright), on the real
service with the bundled model: type, pick a product, see the verdict before the text,
see the text grow. Saves a screenshot to var/test-artifacts/page.png."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from worthit.engine.config import EngineConfig
from worthit.http.app import create_app
from worthit.service.tenants import TenantStore

from engine_fixtures import model_path
from live_server import LiveServer
from service_fixtures import keyed_service, market_copy, market_settings

__all__ = ["keyed_service", "market_copy", "model_path"]

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parents[2] / "var" / "test-artifacts"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Records, in page time, when the verdict card was filled and each length the
# explanation took, so the test can tell "verdict before text" and "text grew".
RECORDER = """
window.__seen = {verdictAt: null, lengths: []};
new MutationObserver(() => {
  const card = document.getElementById('verdict');
  if (card && card.dataset.verdict && window.__seen.verdictAt === null) {
    window.__seen.verdictAt = performance.now();
  }
  const text = (document.getElementById('explanation') || {}).textContent || '';
  const lengths = window.__seen.lengths;
  if (text.length && (!lengths.length || lengths[lengths.length - 1][1] !== text.length)) {
    lengths.push([performance.now(), text.length]);
  }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


@pytest.fixture
def live_service(market_copy: Path, model_path: Path) -> Iterator[LiveServer]:
    settings = market_settings(
        market_copy,
        model_path=model_path,
        engine_config=EngineConfig(context_size=2048, n_threads=2),
        auth=False,
        default_deadline_ms=600_000,  # admit at any machine speed: the test watches the text
    )
    with LiveServer(create_app(settings)) as server:
        yield server


def launch(pw: Playwright) -> Browser:
    """Debian's Chromium, headless, with the real clock: under libfaketime (.ci/any-date)
    Chromium does not load a page with the preload in it."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    real_clock: dict[str, str | float | bool] = {
        k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")
    }
    return pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, env=real_clock)


def test_type_pick_and_watch_the_answer_arrive(live_service: LiveServer) -> None:
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        blocked: list[str] = []  # what the page's Content-Security-Policy refused
        page.on(
            "console",
            lambda msg: blocked.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        page.add_init_script(RECORDER)
        page.goto(live_service.base_url + "/")
        page.fill("#q", "Aurora NC7")
        option = page.locator("#suggestions li", has_text="Aurora NC700")
        option.first.wait_for(timeout=20_000)
        option.first.click()
        page.wait_for_selector("#verdict[data-verdict='BUY']", timeout=30_000)
        page.wait_for_selector("#explanation[aria-busy='false']", timeout=120_000)
        page.wait_for_selector("#chart svg", timeout=20_000)
        word = page.inner_text("#v-word")
        seen = page.evaluate("window.__seen")
        page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
        browser.close()
    assert not errors
    assert not blocked
    assert word == "Worth buying now"  # the API's verdict_label, not a copy in app.js
    assert seen["verdictAt"] is not None and seen["lengths"]
    first_text_at = seen["lengths"][0][0]
    assert seen["verdictAt"] <= first_text_at
    assert len(seen["lengths"]) >= 2, "the explanation should appear in steps, not at once"


def test_a_keyed_service_asks_for_a_key_and_answers_with_it(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    """Outside the demo every /v1 call needs a key; the page had no way to give one."""
    _, key = TenantStore(market_copy).create("shop-page", "medium", rpm=100, tpm=100_000)
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(keyed_service.base_url + "/")
        assert page.is_hidden("#key-form")
        page.fill("#q", "Is the Aurora NC700 worth buying?")
        page.press("#q", "Enter")
        page.wait_for_selector("#key-form:not([hidden])", timeout=20_000)
        asked_for_key = page.inner_text("#status")
        page.fill("#key", "wk_not_a_key")
        page.press("#key", "Enter")
        page.wait_for_selector("#key-form:not([hidden])", timeout=20_000)
        refused = page.inner_text("#status")
        page.fill("#key", key)
        page.press("#key", "Enter")
        page.wait_for_selector("#verdict[data-verdict='BUY']", timeout=20_000)
        hidden_after = page.is_hidden("#key-form")
        page.screenshot(path=str(ARTIFACTS / "page-keyed.png"), full_page=True)
        browser.close()
    assert not errors
    assert "API key" in asked_for_key and "refused" in refused
    assert hidden_after
