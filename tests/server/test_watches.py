"""Price watches through the real service: tenant scoping, signed webhooks to a real
local HTTP server (retried, at-least-once, across a restart), the SSE stream, fire-once;
and the page's "tell me when" button in headless Chromium, keyless and keyed, across a
lost stream."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks import Webhook

from worthit.http.app import create_app
from worthit.service.tenants import TenantStore
from worthit.text.time import iso
from worthit.watches.deliver import HookUrlError, RetryPolicy, check_hook_url

from conftest import MARKET_NOW_MS
from live_server import LiveServer
from service_fixtures import fake_engine, keyed_service, market_copy, market_settings

__all__ = ["keyed_service", "market_copy"]

WAIT_SKU = "S2"
"""WAIT in the small market at 719.43 (an all-time low of 533.49); BUY at 500."""
ARTIFACTS = Path(__file__).parents[2] / "var" / "test-artifacts"


def key(market: Path, name: str) -> dict[str, str]:
    _, secret = TenantStore(market).create(name, "medium", rpm=1_000, tpm=10_000)
    return {"Authorization": f"Bearer {secret}"}


def price(event_id: str, value: float, sku: str = WAIT_SKU) -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "source": "pos", "sku": sku,
            "ts": iso(MARKET_NOW_MS - 1000), "price": value}  # fmt: skip


def eventually(check: Callable[[], bool], what: str, within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers 500 to its first `failures` posts."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.posts: list[tuple[dict[str, str], str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"])).decode()
                receiver.posts.append((dict(self.headers.items()), body))
                self.send_response(500 if len(receiver.posts) <= receiver.failures else 204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()
    yield hook
    hook.close()


def hooked_service(market: Path, **overrides: Any) -> LiveServer:
    """Auth on, webhooks allowed to 127.0.0.1, retries quick enough for a test."""
    settings = market_settings(
        market, auth=True, watch_hooks_private=True, **({"watch_retry_s": 0.05} | overrides)
    )
    return LiveServer(create_app(settings, engine=fake_engine()))


def watch(
    base: str, headers: dict[str, str], condition: str = "verdict_buy", **fields: Any
) -> dict[str, Any]:
    r = httpx.post(
        base + "/v1/watches",
        json={"sku": WAIT_SKU, "condition": condition, **fields},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def writer(market: Path) -> dict[str, str]:
    """A key that writes market events (as source `pos`): plain keys only ask and watch."""
    _, secret = TenantStore(market).create(
        "pos", "medium", rpm=1_000, tpm=10_000, scope="events", source="pos"
    )
    return {"Authorization": f"Bearer {secret}"}


def post_events(base: str, headers: dict[str, str], *events: dict[str, Any]) -> None:
    r = httpx.post(base + "/v1/events", json={"events": list(events)}, headers=headers)
    assert r.status_code == 200 and not r.json()["rejected"], r.text


def listed(base: str, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    r = httpx.get(base + "/v1/watches", headers=headers)
    assert r.status_code == 200
    return {w["id"]: w for w in r.json()["watches"]}


def test_a_tenant_sees_and_deletes_only_its_own_watches(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    base = keyed_service.base_url
    acme, beta = key(market_copy, "acme"), key(market_copy, "beta")
    assert httpx.get(base + "/v1/watches").status_code == 401
    mine = watch(base, acme)
    assert mine["state"] == "active" and mine["delivery"] == "sse" and "secret" not in mine
    assert list(listed(base, acme)) == [mine["id"]]
    assert listed(base, beta) == {}
    for method in ("GET", "DELETE"):
        r = httpx.request(method, f"{base}/v1/watches/{mine['id']}", headers=beta)
        assert r.status_code == 404 and r.json()["field"] == "watch_id"
    assert httpx.post(f"{base}/v1/watches/{mine['id']}/renew", headers=beta).status_code == 404
    assert httpx.delete(f"{base}/v1/watches/{mine['id']}", headers=acme).status_code == 204
    assert listed(base, acme) == {}
    assert httpx.delete(f"{base}/v1/watches/{mine['id']}", headers=acme).status_code == 404


def hook(url: str | None = None) -> dict[str, Any]:
    body = {"sku": WAIT_SKU, "condition": "verdict_buy", "delivery": "webhook"}
    return body if url is None else body | {"url": url}


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"sku": WAIT_SKU, "condition": "price_at_most"}, 422, "target"),
        ({"sku": WAIT_SKU, "condition": "verdict_buy", "target": 5.0}, 422, "target"),
        (hook(), 422, "url"),
        (hook("ftp://example.com/hook"), 422, "url"),
        (hook("http://127.0.0.1:9/hook"), 422, "url"),
        (hook("http://[::ffff:10.0.0.1]/hook"), 422, "url"),
        ({"sku": WAIT_SKU, "condition": "sometime"}, 422, "body.condition"),
        ({"sku": "NO-SUCH-SKU", "condition": "verdict_buy"}, 404, "sku"),
    ],
)
def test_a_bad_watch_is_refused_naming_the_field(
    keyed_service: LiveServer, market_copy: Path, body: dict[str, Any], status: int, field: str
) -> None:
    """Without `watch_hooks_private`, loopback and private receivers are refused (SSRF)."""
    r = httpx.post(keyed_service.base_url + "/v1/watches", json=body, headers=key(market_copy, "a"))
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_a_refused_hook_url_does_not_say_what_its_name_resolves_to(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    r = httpx.post(
        keyed_service.base_url + "/v1/watches",
        json=hook("http://localhost:9/hook"),
        headers=key(market_copy, "a"),
    )
    assert r.status_code == 422 and r.json()["field"] == "url"
    assert "localhost" in r.json()["detail"]
    assert "127.0.0.1" not in r.text and "::1" not in r.text


def test_a_price_at_the_target_delivers_one_signed_webhook_and_the_watch_fires_once(
    market_copy: Path, receiver: Receiver
) -> None:
    headers = key(market_copy, "acme")
    with hooked_service(market_copy) as service:
        base = service.base_url
        made = watch(base, headers, "price_at_most", target=600.0, delivery="webhook",
                     url=receiver.url)  # fmt: skip
        assert made["secret"].startswith("whsec_")
        post_events(base, writer(market_copy), price("p1", 650.0))
        post_events(base, writer(market_copy), price("p2", 590.0))
        eventually(lambda: len(receiver.posts) == 1, "the first webhook")
        post_events(base, writer(market_copy), price("p3", 580.0))
        # a second watch fired by a later event shows the evaluator is past p3
        witness = watch(base, headers, "price_at_most", target=600.0, delivery="webhook",
                        url=receiver.url)  # fmt: skip
        post_events(base, writer(market_copy), price("p4", 570.0))
        eventually(lambda: len(receiver.posts) == 2, "the witness's webhook")
        answer = httpx.post(
            base + "/v1/decide", json={"question": "worth it?", "sku": WAIT_SKU}, headers=headers
        ).json()
        eventually(
            lambda: listed(base, headers)[made["id"]]["deliveries"][0]["state"] == "delivered",
            "the delivery recorded as delivered",
        )
        mine = listed(base, headers)[made["id"]]
    (first_headers, first_body), (_, witness_body) = receiver.posts
    payload = Webhook(made["secret"]).verify(first_body, first_headers)
    assert payload["type"] == "watch.fired"
    data = payload["data"]
    assert (data["watch_id"], data["sku"], data["price"]) == (made["id"], WAIT_SKU, 590.0)
    assert data["verdict"] in ("BUY", "WAIT", "SKIP") and data["facts_version"]
    assert json.loads(witness_body)["data"]["watch_id"] == witness["id"]
    assert json.loads(witness_body)["data"]["facts_version"] == answer["facts_version"]
    assert mine["state"] == "fired" and mine["notification"] == payload
    assert [d["attempts"] for d in mine["deliveries"]] == [1]


def test_a_receiver_failing_twice_gets_the_same_webhook_id_three_times(
    market_copy: Path,
) -> None:
    hook = Receiver(failures=2)
    headers = key(market_copy, "acme")
    try:
        with hooked_service(market_copy) as service:
            base = service.base_url
            made = watch(base, headers, delivery="webhook", url=hook.url)
            post_events(base, writer(market_copy), price("p1", 500.0))
            eventually(lambda: len(hook.posts) == 3, "three attempts")
            eventually(
                lambda: listed(base, headers)[made["id"]]["deliveries"][0]["state"] == "delivered",
                "the third attempt recorded",
            )
            delivery = listed(base, headers)[made["id"]]["deliveries"][0]
    finally:
        hook.close()
    ids = {h["webhook-id"] for h, _ in hook.posts}
    assert ids == {delivery["id"]}
    assert len({body for _, body in hook.posts}) == 1
    for sent_headers, body in hook.posts:
        Webhook(made["secret"]).verify(body, sent_headers)
    assert delivery["attempts"] == 3 and delivery["last_error"] is None


def test_a_delivery_that_never_succeeds_is_marked_failed(market_copy: Path) -> None:
    hook = Receiver(failures=1_000)
    headers = key(market_copy, "acme")
    try:
        with hooked_service(market_copy, watch_attempts=3) as service:
            base = service.base_url
            made = watch(base, headers, delivery="webhook", url=hook.url)
            post_events(base, writer(market_copy), price("p1", 500.0))
            eventually(
                lambda: listed(base, headers)[made["id"]]["deliveries"][0]["state"] == "failed",
                "the delivery marked failed",
            )
            delivery = listed(base, headers)[made["id"]]["deliveries"][0]
    finally:
        hook.close()
    assert len(hook.posts) == 3
    assert delivery["attempts"] == 3 and delivery["last_error"] == "HTTP 500"


def test_a_pending_delivery_is_sent_after_a_restart(market_copy: Path) -> None:
    hook = Receiver(failures=1_000)
    headers = key(market_copy, "acme")
    try:
        with hooked_service(market_copy, watch_attempts=1_000, watch_retry_s=0.2) as service:
            made = watch(service.base_url, headers, delivery="webhook", url=hook.url)
            post_events(service.base_url, writer(market_copy), price("p1", 500.0))
            eventually(lambda: len(hook.posts) >= 1, "a first, failed attempt")
        tried = len(hook.posts)
        hook.failures = 0
        with hooked_service(market_copy) as service:
            eventually(lambda: len(hook.posts) > tried, "the attempt after the restart")
            eventually(
                lambda: (
                    listed(service.base_url, headers)[made["id"]]["deliveries"][0]["state"]
                    == "delivered"
                ),
                "the delivery recorded",
            )
    finally:
        hook.close()
    assert len({h["webhook-id"] for h, _ in hook.posts}) == 1


def test_the_sse_stream_carries_the_tenants_notifications(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    base = keyed_service.base_url
    headers = key(market_copy, "acme")
    made = watch(base, headers)
    timeout = httpx.Timeout(20.0)
    with httpx.stream("GET", base + "/v1/watches/events", headers=headers, timeout=timeout) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        assert next(lines) == "event: ready"
        post_events(base, writer(market_copy), price("p1", 500.0))
        event = next(line for line in lines if line.startswith("event:"))
        data = json.loads(next(lines).removeprefix("data: "))
    assert event == "event: watch"
    assert data["data"]["watch_id"] == made["id"]
    assert data["data"]["verdict"] == "BUY" and data["data"]["price"] == 500.0
    assert listed(base, headers)[made["id"]]["state"] == "fired"
    renewed = httpx.post(f"{base}/v1/watches/{made['id']}/renew", headers=headers).json()
    assert renewed["state"] == "active"


def test_hook_urls_must_be_http_and_public_unless_private_ones_are_allowed() -> None:
    for url in ("http://8.8.8.8/hook", "https://[2001:4860:4860::8888]/h"):
        check_hook_url(url, allow_private=False)
    for url in ("http://127.0.0.1/h", "http://10.1.2.3/h", "http://169.254.169.254/latest",
                "http://[::1]/h", "http://0.0.0.0/h", "http://100.64.0.1/h"):  # fmt: skip
        with pytest.raises(HookUrlError):
            check_hook_url(url, allow_private=False)
        check_hook_url(url, allow_private=True)
    for url in ("file:///etc/passwd", "gopher://x/", "http:///nohost", "http://u:p@8.8.8.8/"):
        with pytest.raises(HookUrlError):
            check_hook_url(url, allow_private=True)


@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=2**32))
def test_backoff_doubles_with_jitter_up_to_the_cap(attempts: int, seed: int) -> None:
    policy = RetryPolicy(max_attempts=50, base_s=2.0, cap_s=600.0)
    delay = policy.delay_s(attempts, random.Random(seed))
    full = min(600.0, 2.0 * 2 ** (attempts - 1))
    assert full / 2 <= delay <= full


class Relay:
    """A TCP relay in front of the service, so a test can cut the browser's connections
    (and refuse new ones) the way a lost network would; Chromium's offline emulation
    leaves an open stream alone."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.held = False
        self.conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self) -> None:
        """Drop every open connection and refuse new ones until `release`."""
        self.held = True
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.conns.clear()

    def release(self) -> None:
        self.held = False

    def close(self) -> None:
        self.hold()
        self.listener.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                if self.held:
                    client.close()
                    continue
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
                self.conns += [client, server]
                for a, b in ((client, server), (server, client)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.mark.slow
@pytest.mark.parametrize("keyed", [False, True], ids=["demo", "keyed"])
def test_the_page_offers_tell_me_when_on_a_wait_card(market_copy: Path, keyed: bool) -> None:
    """Click "tell me when" on S2's WAIT card; the stream drops and the price event that
    turns it BUY comes while it is down; the page reconnects with Last-Event-ID, and the
    notice shows. Keyed, every call (the stream too) carries the key in `Authorization`."""
    from playwright.sync_api import Request, sync_playwright
    from test_page_browser import CHROMIUM, FLAGS

    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    headers = key(market_copy, "shopper") if keyed else {}
    settings = market_settings(market_copy, auth=keyed)
    with LiveServer(create_app(settings, engine=fake_engine())) as service, sync_playwright() as pw:
        base = service.base_url
        relay = Relay(int(base.rsplit(":", 1)[1]))
        real_clock: dict[str, str | float | bool] = {
            k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")
        }
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, env=real_clock)
        context = browser.new_context(viewport={"width": 1100, "height": 1100})
        page = context.new_page()
        if keyed:  # where the page keeps an operator's key (app.js `headers()`)
            secret = headers["Authorization"].removeprefix("Bearer ")
            page.add_init_script(
                f"localStorage.setItem('worthit.apiKey', {json.dumps(json.dumps(secret))})"
            )
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        blocked: list[str] = []
        page.on(
            "console",
            lambda msg: blocked.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        streams: list[Request] = []
        page.on("request", lambda r: streams.append(r) if "/v1/watches/events" in r.url else None)
        page.goto(relay.base_url + "/")
        page.fill("#q", "Lumina 55U8")
        page.locator("#suggestions li", has_text="Lumina 55U8").first.click(timeout=20_000)
        page.wait_for_selector("#verdict[data-verdict='WAIT']", timeout=30_000)
        page.wait_for_selector("#watch-button:visible", timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / f"watch-wait-{'keyed' if keyed else 'demo'}.png"))
        page.click("#watch-button", timeout=10_000)
        page.wait_for_selector("#watch-status:has-text('We’ll tell you')", timeout=10_000)
        relay.hold()  # the stream is lost...
        post_events(base, writer(market_copy), price("p1", 500.0))  # ...when the watch fires
        eventually(lambda: [w["state"] for w in listed(base, headers).values()] == ["fired"],
                   "the watch fired")  # fmt: skip
        relay.release()
        page.wait_for_selector("#watch-notice:not([hidden])", timeout=20_000)
        notice = page.inner_text("#watch-notice")
        page.screenshot(path=str(ARTIFACTS / "watch.png"), full_page=True)
        sent = [r.all_headers() for r in streams]
        browser.close()
        relay.close()
    assert not errors and not blocked
    assert "Worth buying now" in notice
    assert len(sent) >= 2, "the page should have opened the stream again"
    assert "last-event-id" not in sent[0] and sent[-1]["last-event-id"]
    for request_headers in sent:
        assert ("authorization" in request_headers) is keyed
    if keyed:
        assert all(r.url == relay.base_url + "/v1/watches/events" for r in streams)  # no key
        assert {h["authorization"] for h in sent} == {headers["Authorization"]}
