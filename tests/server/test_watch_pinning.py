"""Webhook deliveries connect to the address they checked (DNS-rebinding pinning), against
real local HTTP and HTTPS receivers: the resolver is a parameter, so a test can make the
name resolve one way when the watch is made and another when it is delivered."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks import Webhook

from worthit.watches.deliver import (
    HookUrlError,
    Resolver,
    RetryPolicy,
    WebhookDeliverer,
    check_hook_url,
)
from worthit.watches.store import Condition, Delivery, DeliveryRecord, DeliveryState, WatchStore

NAME = "hook.test"
"""A name no real resolver knows: reaching the receiver through it proves the pinned address
was used, not a second lookup by the HTTP client."""
PUBLIC = "93.184.216.34"


class Receiver:
    """Records each POST's headers (names in lower case) and, over TLS, the SNI name the
    client sent."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.posts: list[dict[str, str]] = []
        self.sni: list[str | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                receiver.posts.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda _sock, name, _ctx: receiver.sni.append(name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()
    yield hook
    hook.close()


def resolving(*answers: list[str]) -> tuple[Resolver, list[str]]:
    """A resolver giving `answers` in turn (the last one from then on), and the names asked."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[min(len(asked), len(answers)) - 1]

    return resolve, asked


def deliver(
    tmp_path: Path, url: str, resolve: Resolver, *, allow_private: bool,
    verify: ssl.SSLContext | bool = True,
) -> tuple[DeliveryRecord, str]:  # fmt: skip
    """Fire one webhook watch and run a deliverer (one attempt) until it has settled."""
    tmp_path.mkdir(exist_ok=True)
    store = WatchStore(tmp_path / "watches.db")
    watch = store.add("acme", "S2", Condition.VERDICT_BUY, None, Delivery.WEBHOOK, url, 0)
    delivery_id = store.fire(watch.watch_id, {"type": "watch.fired", "data": {}}, 0)
    assert delivery_id and watch.secret

    async def run() -> DeliveryRecord:
        deliverer = WebhookDeliverer(
            store, RetryPolicy(max_attempts=1), allow_private=allow_private, resolve=resolve,
            verify=verify,
        )  # fmt: skip
        deliverer.start()
        try:
            for _ in range(1000):
                record = store.delivery(delivery_id)
                assert record is not None
                if record.state is not DeliveryState.PENDING:
                    return record
                await asyncio.sleep(0.01)
            raise AssertionError("the delivery never settled")
        finally:
            await deliverer.stop()
            store.close()

    return asyncio.run(run()), watch.secret


def test_a_name_for_loopback_is_refused_unless_private_hooks_are_allowed(
    receiver: Receiver,
) -> None:
    url = f"http://localhost:{receiver.port}/hook"
    with pytest.raises(HookUrlError, match="loopback, private or reserved"):
        check_hook_url(url, allow_private=False)
    check_hook_url(url, allow_private=True)


def test_a_name_rebound_to_loopback_after_the_check_reaches_nothing(
    tmp_path: Path, receiver: Receiver
) -> None:
    url = f"http://{NAME}:{receiver.port}/hook"
    resolve, asked = resolving([PUBLIC], ["127.0.0.1"])
    check_hook_url(url, allow_private=False, resolve=resolve)  # when the watch is made
    record, _ = deliver(tmp_path, url, resolve, allow_private=False)
    assert record.state is DeliveryState.FAILED
    assert record.last_error is not None and "loopback" in record.last_error
    assert "127.0.0.1" not in record.last_error  # what a name resolves to is never said
    assert asked == [NAME, NAME]
    assert receiver.posts == []


def test_one_private_address_among_public_ones_refuses_the_delivery(
    tmp_path: Path, receiver: Receiver
) -> None:
    resolve, _ = resolving([PUBLIC, "127.0.0.1"])
    record, _ = deliver(tmp_path, f"http://{NAME}:{receiver.port}/h", resolve, allow_private=False)
    assert record.state is DeliveryState.FAILED and receiver.posts == []


def test_a_pinned_delivery_reaches_the_checked_address_naming_the_urls_host(
    tmp_path: Path, receiver: Receiver
) -> None:
    """127.0.0.2 refuses (nothing listens there), so the next checked address is tried."""
    resolve, asked = resolving(["127.0.0.2", "127.0.0.1"])
    url = f"http://{NAME}:{receiver.port}/hook?x=1"
    record, secret = deliver(tmp_path, url, resolve, allow_private=True)
    assert record.state is DeliveryState.DELIVERED, record.last_error
    assert asked == [NAME]  # resolved once, by the deliverer; httpx never looked it up
    (headers,) = receiver.posts
    assert headers["host"] == f"{NAME}:{receiver.port}"
    Webhook(secret).verify('{"type":"watch.fired","data":{}}', headers)


def test_an_https_delivery_sends_the_name_as_sni_and_checks_the_certificate_for_it(
    tmp_path: Path,
) -> None:
    """The connection goes to 127.0.0.1, yet TLS names NAME: SNI, and the certificate is
    checked for NAME (one made for another name, though trusted, is refused)."""
    resolve, _ = resolving(["127.0.0.1"])
    for name, delivered in ((NAME, True), ("other.test", False)):
        server_tls, cert_pem = tls_pair(tmp_path, name)
        hook = Receiver(server_tls)
        try:
            record, _ = deliver(
                tmp_path / name, f"https://{NAME}:{hook.port}/hook", resolve, allow_private=True,
                verify=ssl.create_default_context(cadata=cert_pem),
            )  # fmt: skip
        finally:
            hook.close()
        if delivered:
            assert record.state is DeliveryState.DELIVERED, record.last_error
            assert hook.sni == [NAME] and hook.posts[0]["host"] == f"{NAME}:{hook.port}"
        else:
            assert record.state is DeliveryState.FAILED and hook.posts == []
            assert record.last_error is not None and "certificate" in record.last_error.lower()


def tls_pair(folder: Path, name: str) -> tuple[ssl.SSLContext, str]:
    """A server context with a fresh self-signed certificate for `name`, and that
    certificate's PEM for a client to trust."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))  # valid whatever the day
        .not_valid_after(dt.datetime(2099, 1, 1, tzinfo=dt.UTC))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()  # fmt: skip
    pem = folder / f"{name}.pem"
    pem.write_text(cert_pem + key_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pem)
    return server, cert_pem
