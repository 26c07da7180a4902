"""Delivering fired watches: signed webhooks, retried, and the tenant's SSE streams.

A webhook is sent at least once. Its delivery (id, body) was written to SQLite when the
watch fired (watches/store.py), so one that has not had its 2xx when the process stops
is sent again after the restart, under the same `webhook-id`, for the receiver to drop
the repeat. Each attempt is signed afresh with Standard Webhooks (the `standardwebhooks`
package's own signer: HMAC-SHA256 over `id.timestamp.body` under the watch's secret),
so its timestamp is always inside the receiver's 300 s tolerance.

A failed attempt (no connection, a timeout, a non-2xx answer) is retried after an
exponential backoff with jitter; after `RetryPolicy.max_attempts` the delivery is marked
failed, which `GET /v1/watches` shows. Redirects are not followed: a receiver that
redirects is a failed attempt, so a public URL cannot bounce a delivery to a private one.

The SSE streams are live only: a tenant's open `GET /v1/watches/events` streams get every
notification of that tenant's watches as it fires; nothing is kept for a stream opened
later (the fired watch in the listing keeps its notification).

URLs are checked for SSRF twice, when the watch is created and before each attempt (the
name may resolve elsewhere by then): http or https only, and, unless private hooks are
allowed (the demo, or `ServiceSettings.watch_hooks_private`), every address the host
resolves to must be a global one. Each attempt resolves the name once and connects to the
addresses it checked (the URL's host still in `Host`, SNI and the certificate check), so
a name re-pointed at 127.0.0.1 between the check and the connection (DNS rebinding)
reaches nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from standardwebhooks import Webhook

from worthit.decide.decider import Decider
from worthit.text.time import now_ms
from worthit.watches.evaluate import Notification, WatchEvaluator
from worthit.watches.store import PendingDelivery, WatchStore

log = logging.getLogger(__name__)

TIMEOUT = httpx.Timeout(10.0, connect=3.0)
"""A receiver gets 3 s to accept the connection and 10 s to answer."""
MAX_IN_FLIGHT = 16
"""Deliveries attempted at once."""
STREAM_BACKLOG = 100
"""Notifications an SSE stream may fall behind by before it misses some."""
MAX_URL_CHARS = 2048
MAX_ADDRESSES_TRIED = 3
"""Checked addresses a delivery tries in turn: a name with many unreachable ones must not
hold a delivery slot for a connect timeout each."""


class HookUrlError(ValueError):
    """A webhook URL the service will not call."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 8
    base_s: float = 2.0
    cap_s: float = 600.0

    def delay_s(self, attempts: int, rng: random.Random) -> float:
        """After `attempts` failures: base·2^(attempts−1), capped, times U(0.5, 1), so
        receivers that failed together do not all come back in the same second."""
        backoff: float = min(self.cap_s, self.base_s * 2.0 ** (attempts - 1))
        return backoff * rng.uniform(0.5, 1.0)


Resolver = Callable[[str, int], list[str]]
"""A host name and port to the addresses it resolves to now (blocking)."""


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class HookTarget:
    """A webhook URL and the addresses, resolved once and checked, its delivery connects to.

    The connection goes to these addresses, never to a second resolution of the name, so a
    name that resolves public for the check and private a moment later (DNS rebinding)
    cannot steer the delivery: what was checked is what is called."""

    url: httpx.URL
    addresses: tuple[str, ...]

    def pinned_url(self, address: str) -> httpx.URL:
        return self.url.copy_with(host=address, port=self.url.port or _default_port(self.url))

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")

    @property
    def sni_hostname(self) -> str:
        return _ascii_host(self.url)


def check_hook_url(url: str, *, allow_private: bool, resolve: Resolver = system_resolver) -> None:
    """Raise HookUrlError unless `url` is http(s) and (unless allowed) public. Resolves
    the host name: blocking, so call it off the event loop."""
    parts = _hook_parts(url)
    if not allow_private:
        port = parts.port or _default_port(parts)
        _checked_addresses(_ascii_host(parts), port, resolve, allow_private=False)


def resolve_hook(
    url: str, *, allow_private: bool, resolve: Resolver = system_resolver
) -> HookTarget:
    """Check `url` as check_hook_url does and pin the addresses it resolves to (also when
    private ones are allowed: the delivery never resolves the name again)."""
    parts = _hook_parts(url)
    port = parts.port or _default_port(parts)
    return HookTarget(parts, _checked_addresses(_ascii_host(parts), port, resolve, allow_private))


def _hook_parts(url: str) -> httpx.URL:
    if len(url) > MAX_URL_CHARS:
        raise HookUrlError(f"at most {MAX_URL_CHARS} characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise HookUrlError("must be an http or https URL")
    if not parts.hostname:
        raise HookUrlError("must name a host")
    if parts.username is not None or parts.password is not None:
        raise HookUrlError("must not carry credentials")
    try:
        parts.port  # noqa: B018 - raises for a port out of range
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise HookUrlError(f"not a valid URL: {exc}") from None
    if not parsed.host:
        raise HookUrlError("must name a host")
    return parsed


def _ascii_host(url: httpx.URL) -> str:
    """The name as DNS and TLS see it (IDNA), without an IPv6 literal's brackets."""
    return url.raw_host.decode("ascii")


def _default_port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


def _checked_addresses(
    host: str, port: int, resolve: Resolver, allow_private: bool
) -> tuple[str, ...]:
    """The addresses `host` resolves to, all of them public unless private ones are
    allowed. A refusal never says which address a name resolved to: that would answer
    questions about the server's network (what an internal name points at) to whoever
    can create a watch."""
    try:
        found = resolve(host, port)
    except (OSError, UnicodeError, ValueError):
        raise HookUrlError(f"cannot resolve {host!r}") from None
    if not found:
        raise HookUrlError(f"cannot resolve {host!r}")
    for found_address in found:
        try:
            address = ipaddress.ip_address(found_address)
        except ValueError:
            raise HookUrlError(f"cannot resolve {host!r} to an IP address") from None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not allow_private and (not address.is_global or address.is_multicast):
            raise HookUrlError(
                f"{host!r} is or resolves to a loopback, private or reserved address: "
                "webhooks go to public addresses only"
            )
    return tuple(found)


class WebhookDeliverer:
    """Sends the pending deliveries of a WatchStore as they fall due, until stopped."""

    def __init__(
        self,
        store: WatchStore,
        policy: RetryPolicy,
        *,
        allow_private: bool,
        rng: random.Random | None = None,
        resolve: Resolver = system_resolver,
        verify: ssl.SSLContext | bool = True,
        poll_s: float | None = None,
    ) -> None:
        """`poll_s`: look at least this often for deliveries other processes queued (they
        cannot wake this one); None when only this process queues them."""
        self.store = store
        self.poll_s = poll_s
        self.policy = policy
        self.allow_private = allow_private
        self.rng = rng or random.Random()
        self.resolve = resolve
        self.verify = verify
        self.sent = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        """New deliveries were queued: look now rather than at the next due time."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop sending; what is still pending is sent after the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        # No kept-alive connections: each delivery connects to the address it just checked,
        # and a pooled connection would carry one name's TLS session to another's request.
        async with httpx.AsyncClient(
            timeout=TIMEOUT,
            follow_redirects=False,
            trust_env=False,
            verify=self.verify,
            limits=httpx.Limits(max_keepalive_connections=0),
        ) as client:
            while True:
                self._wake.clear()
                try:
                    due = await asyncio.to_thread(self.store.due, now_ms(), MAX_IN_FLIGHT)
                    if due:
                        await asyncio.gather(*(self._attempt(client, d) for d in due))
                        continue
                    next_ms = await asyncio.to_thread(self.store.next_due_ms)
                except Exception:  # the store failed this round: try again shortly
                    log.exception("could not read the pending watch deliveries")
                    next_ms = now_ms() + 1000
                wait_s = None if next_ms is None else max(0, next_ms - now_ms()) / 1000
                if self.poll_s is not None:
                    wait_s = self.poll_s if wait_s is None else min(wait_s, self.poll_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s)

    async def _attempt(self, client: httpx.AsyncClient, delivery: PendingDelivery) -> None:
        error = await self._send(client, delivery)
        if error is None:
            self.sent += 1
            await asyncio.to_thread(self.store.delivered, delivery.delivery_id)
            return
        attempts = delivery.attempts + 1
        if attempts >= self.policy.max_attempts:
            log.warning("watch delivery %s failed %d times: %s", delivery.delivery_id,
                        attempts, error)  # fmt: skip
            await asyncio.to_thread(self.store.failed, delivery.delivery_id, error)
            return
        due_ms = now_ms() + round(1000 * self.policy.delay_s(attempts, self.rng))
        await asyncio.to_thread(self.store.retry, delivery.delivery_id, error, due_ms)

    async def _send(self, client: httpx.AsyncClient, delivery: PendingDelivery) -> str | None:
        """One attempt; None when the receiver took it, else what went wrong."""
        try:
            target = await asyncio.to_thread(
                resolve_hook, delivery.url, allow_private=self.allow_private, resolve=self.resolve
            )
        except HookUrlError as exc:
            return f"refused URL: {exc}"
        timestamp = datetime.now(UTC)
        signature = Webhook(delivery.secret).sign(delivery.delivery_id, timestamp, delivery.payload)
        headers = {
            "content-type": "application/json",
            "user-agent": "worthit-watches",
            "webhook-id": delivery.delivery_id,
            "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": signature,
        }
        try:
            response = await _post_pinned(client, target, delivery.payload, headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"


async def _post_pinned(
    client: httpx.AsyncClient, target: HookTarget, body: str, headers: dict[str, str]
) -> httpx.Response:
    """POST to the checked addresses in turn (the next only if one cannot be reached); the
    request naming the URL's host: `Host` for the receiver, SNI and the certificate check
    for https (httpcore's `sni_hostname` extension)."""
    headers = headers | {"host": target.host_header}
    extensions = {"sni_hostname": target.sni_hostname} if target.url.scheme == "https" else {}
    unreachable: httpx.TransportError | None = None
    for address in target.addresses[:MAX_ADDRESSES_TRIED]:
        try:
            return await client.post(
                target.pinned_url(address), content=body, headers=headers, extensions=extensions
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            unreachable = exc
    assert unreachable is not None  # a target has at least one address
    raise unreachable


class WatchStreams:
    """The open SSE streams of each tenant, each a bounded queue of notifications."""

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self.dropped = 0

    @contextlib.contextmanager
    def open(self, tenant: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(STREAM_BACKLOG)
        self._queues.setdefault(tenant, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._queues.get(tenant, set())
            queues.discard(queue)
            if not queues:
                self._queues.pop(tenant, None)

    def publish(self, tenant: str, body: dict[str, Any]) -> None:
        for queue in self._queues.get(tenant, ()):
            try:
                queue.put_nowait(body)
            except asyncio.QueueFull:  # a stream that does not read must not hold others up
                self.dropped += 1


class WatchService:
    """Watches for one app's lifetime: the store, the evaluator the bus feeds, the
    webhook deliverer and the SSE streams."""

    def __init__(
        self,
        store: WatchStore,
        decider: Decider,
        policy: RetryPolicy,
        *,
        allow_private: bool,
        poll_s: float | None = None,
        fanout: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.allow_private = allow_private
        self.streams = WatchStreams()
        self.deliverer = WebhookDeliverer(store, policy, allow_private=allow_private, poll_s=poll_s)
        self.evaluator = WatchEvaluator(store, decider, self._notify)
        self.fanout = fanout
        """Also hands each notification to the other workers' streams (service/shared_state.py,
        over Redis); this process's own streams get it directly first."""

    def start(self) -> None:
        self.deliverer.start()

    async def stop(self) -> None:
        await self.evaluator.stop()
        await self.deliverer.stop()
        self.store.close()

    def _notify(self, fired: list[Notification]) -> None:
        for notification in fired:
            self.streams.publish(notification.tenant, notification.body)
            if self.fanout is not None:
                self.fanout(notification.tenant, notification.body)
        if any(notification.delivery_id for notification in fired):
            self.deliverer.wake()
