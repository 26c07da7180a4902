"""Feeds: a JSON, JSONL or CSV file at a URL, polled into the one apply path.

A retailer that can neither push webhooks nor run a Redis producer can still publish a
file. Each poller fetches one URL every `interval_s`, conditionally: the last response's
ETag goes back as If-None-Match and its Last-Modified as If-Modified-Since, so a feed that
has not changed answers 304 and costs one round trip, no body and no parsing. A 200 is
parsed (off the event loop) and its events go through `apply` (the service passes its
bus's `submit`, so the after-commit notices follow as for every other input); because
events are idempotent by `event_id`, a feed re-read whole after a change lands only its
new events, the rest come back as duplicates.

The validators are kept only once a body's events have been committed, so a body that
could not be read or applied is fetched whole again rather than answered 304.

Errors back off with jitter (the Redis consumer's `Backoff`): a connection that fails, a
timeout, a 5xx, a 429, a body that is not a feed, a store that cannot commit. A 429 or
503 with Retry-After waits what it says instead. Any other 4xx is the configuration's
fault, not the network's: it is logged and tried again at the interval. The first
success returns to the interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import TypeAdapter, ValidationError

from worthit.market.apply import EventResult, Outcome
from worthit.market.events import Event, EventError, SourceName, parse_event
from worthit.market.ingest.redis_stream import Apply, Backoff
from worthit.text.time import Clock, now_ms

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60.0
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_SOURCE = "feed"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
FEED_BACKOFF = Backoff(first_s=1.0, max_s=300.0)
"""From 1 s doubling to 5 min: a feed's server that is down is not hammered."""
MAX_RETRY_AFTER_S = 3600.0
"""A Retry-After longer than this is taken as this: a typo must not silence a feed for days."""
SUBMIT_CHUNK = 1_000
LOGGED_REJECTIONS = 20
"""Per poll: a feed of a million bad rows logs this many and a count, not a million lines."""
SHOWN_REJECTIONS = 5
CSV_NESTED = ("attributes", "aliases")
"""Product fields that hold an object or a list: a CSV cell cannot carry them."""

USER_AGENT = "worthit-feed/1"
_SOURCE: TypeAdapter[str] = TypeAdapter(SourceName)


class FeedFormat(StrEnum):
    JSON = "json"
    """`{"events": [...]}`, a list of events, or one event object."""
    JSONL = "jsonl"
    """One event object per line; blank lines are skipped."""
    CSV = "csv"
    """A header row of event field names, one event per row; empty cells are left out."""


_CONTENT_TYPES = {
    "application/json": FeedFormat.JSON,
    "application/x-ndjson": FeedFormat.JSONL,
    "application/ndjson": FeedFormat.JSONL,
    "application/jsonl": FeedFormat.JSONL,
    "application/x-jsonlines": FeedFormat.JSONL,
    "application/jsonlines": FeedFormat.JSONL,
    "text/csv": FeedFormat.CSV,
}
_SUFFIXES = {
    ".json": FeedFormat.JSON,
    ".jsonl": FeedFormat.JSONL,
    ".ndjson": FeedFormat.JSONL,
    ".csv": FeedFormat.CSV,
}


@dataclass(frozen=True)
class FeedConfig:
    url: str
    interval_s: float = DEFAULT_INTERVAL_S
    """Between two polls that succeeded (a 200 or a 304)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """For connecting and for each read of the response."""
    source: str = DEFAULT_SOURCE
    """Given to the feed's events that name no `source` of their own."""
    format: FeedFormat | None = None
    """None: from the response's Content-Type, else the URL's suffix, else the body's look."""
    backoff: Backoff = FEED_BACKOFF
    max_bytes: int = DEFAULT_MAX_BYTES
    """A larger body is refused (a bad body), so a wrong URL cannot fill the memory."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a feed is an http:// or https:// URL, got {self.url!r}")
        for name in ("interval_s", "timeout_s"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")
        try:
            _SOURCE.validate_python(self.source)
        except ValidationError:
            raise ValueError(
                f"a source name is letters, digits, '.', '_' or '-' (at most 64), "
                f"got {self.source!r}"
            ) from None

    @property
    def where(self) -> str:
        """The URL without credentials or query (which may carry a token): what status
        and logs may show."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


class FeedBodyError(ValueError):
    """The body is not a feed at all (not JSON, not UTF-8, no CSV header, too large)."""


@dataclass(frozen=True, slots=True)
class FeedBatch:
    """A body's events that parsed, each with its index in the feed, and the refused ones."""

    events: list[tuple[int, Event]]
    rejected: list[EventError]


def parse_events(
    items: Sequence[object], source: str | None = None, *, other_sources: bool = False
) -> tuple[list[tuple[int, Event]], list[EventError]]:
    """The events that parse, with their index, and the errors of those that do not.

    With `source`, an event may leave it out and gets that one. A webhook's source is
    proven by its signature, so there an event naming another is refused; a feed is
    trusted by its configuration (`other_sources`), so its events may name their own.
    An item that is already an EventError (a feed's line that was not JSON) is passed on."""
    good: list[tuple[int, Event]] = []
    rejected: list[EventError] = []
    for index, data in enumerate(items):
        if isinstance(data, EventError):
            rejected.append(data)
            continue
        if source is not None and isinstance(data, dict) and "source" not in data:
            data = {**data, "source": source}
        parsed = parse_event(data, index)
        if isinstance(parsed, EventError):
            rejected.append(parsed)
        elif source is not None and not other_sources and parsed.source != source:
            message = f"must be {source!r}, this webhook's source, or left out"
            rejected.append(EventError(index, "source", message, parsed.event_id))
        else:
            good.append((index, parsed))
    return good, rejected


def parse_feed(body: bytes, fmt: FeedFormat, source: str) -> FeedBatch:
    """A feed's body → its events; raises FeedBodyError when it is not a feed at all.
    Each event is judged on its own, so one bad line or row costs only itself."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FeedBodyError(f"not UTF-8 text: {exc}") from None
    if fmt is FeedFormat.JSON:
        items = _json_items(text)
    elif fmt is FeedFormat.JSONL:
        items = _jsonl_items(text)
    else:
        items = _csv_items(text)
    good, rejected = parse_events(items, source, other_sources=True)
    return FeedBatch(good, rejected)


def _json_items(text: str) -> list[object]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise FeedBodyError(f"not JSON: {exc}") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        return list(data["events"])
    if isinstance(data, dict) and "type" in data and "events" not in data:
        return [data]
    raise FeedBodyError('expected {"events": [...]}, a list of events or one event object')


def _jsonl_items(text: str) -> list[object]:
    items: list[object] = []
    for line in text.split("\n"):  # not splitlines: U+2028 may sit inside a JSON string
        if not line.strip():
            continue
        index = len(items)
        try:
            items.append(json.loads(line))
        except (ValueError, RecursionError) as exc:
            items.append(EventError(index, "(event)", f"not valid JSON: {exc}"))
    return items


def _csv_items(text: str) -> list[object]:
    reader = csv.DictReader(io.StringIO(text, newline=""), restkey="\0extra")
    try:
        header = [name.strip() for name in reader.fieldnames or ()]
        reader.fieldnames = header
        if "type" not in header:
            raise FeedBodyError("a CSV feed starts with a header row naming `type` and the fields")
        items: list[object] = []
        for index, row in enumerate(reader):
            items.append(_csv_event(index, row))
    except csv.Error as exc:
        raise FeedBodyError(f"not CSV: {exc}") from None
    return items


def _csv_event(index: int, row: dict[str, Any]) -> object:
    """Empty cells are left out, so one file can mix event types (each fills its own
    columns) and optional fields keep their defaults; the cells stay text, which the
    event models read as numbers, times and booleans."""
    event_id = row.get("event_id") or None
    if row.get("\0extra"):
        return EventError(index, "(row)", "more cells than the header has columns", event_id)
    for name in CSV_NESTED:
        if row.get(name):
            message = "a CSV cell cannot hold it: send product events with it as JSON or JSONL"
            return EventError(index, name, message, event_id)
    return {name: value for name, value in row.items() if value not in ("", None)}


def detect_format(config: FeedConfig, content_type: str | None, body: bytes) -> FeedFormat:
    """The configured format; else the one the Content-Type names; else the URL's suffix;
    else the body's first character (`[` JSON, `{` JSON if it parses whole, else JSONL;
    anything else CSV)."""
    if config.format is not None:
        return config.format
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _CONTENT_TYPES:
        return _CONTENT_TYPES[media]
    path = urlsplit(config.url).path.lower()
    for suffix, fmt in _SUFFIXES.items():
        if path.endswith(suffix):
            return fmt
    start = body.lstrip()[:1]
    if start == b"[":
        return FeedFormat.JSON
    if start == b"{":
        try:
            json.loads(body)
        except ValueError:
            return FeedFormat.JSONL
        return FeedFormat.JSON
    return FeedFormat.CSV


class FeedState(StrEnum):
    STARTING = "starting"
    OK = "ok"
    """The last poll succeeded: a 200 applied, or a 304."""
    RETRYING = "retrying"
    """The last poll failed on the network, the server (5xx, 429), the body or the store;
    the next waits a backoff step."""
    FAILING = "failing"
    """The server refused the request (a 4xx): tried again at the interval."""
    STOPPED = "stopped"


@dataclass
class FeedStats:
    polls: int = 0
    fetched: int = 0
    """200s whose events were applied."""
    not_modified: int = 0
    errors: int = 0
    applied: int = 0
    duplicates: int = 0
    rejected: int = 0
    """Events refused, by parsing or by the store, over all polls."""


@dataclass(frozen=True, slots=True)
class PollResult:
    """What one poll did, and how long the poller waits before the next."""

    status: int | None
    """The HTTP status, None when no response came."""
    wait_s: float
    applied: int = 0
    duplicates: int = 0
    rejected: list[EventError] = field(default_factory=list)
    error: str | None = None


class FeedPoller:
    """Polls one feed into `apply` until stopped; `poll` is one round, for the loop and
    for a caller that wants to drive it."""

    def __init__(
        self,
        config: FeedConfig,
        apply: Apply,
        *,
        clock: Clock = now_ms,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.apply = apply
        self.clock = clock
        self.stats = FeedStats()
        self.state = FeedState.STARTING
        self.etag: str | None = None
        self.last_modified: str | None = None
        self.last_status: int | None = None
        self.last_error: str | None = None
        self.last_rejected: list[EventError] = []
        self.last_poll_ms: int | None = None
        self.last_success_ms: int | None = None
        self._rng = rng
        self._attempt = 0
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s),
            follow_redirects=True,
            headers={"User-Agent": USER_AGENT},
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Poll at once, then on schedule, on the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop polling (a batch already handed to `apply` is still applied by the bus)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._client.aclose()
        self.state = FeedState.STOPPED

    @property
    def healthy(self) -> bool:
        return self.state in (FeedState.STARTING, FeedState.OK, FeedState.STOPPED)

    def status(self) -> dict[str, Any]:
        """What /readyz shows for this feed."""
        config = self.config
        return {
            "url": config.where,
            "source": config.source,
            "interval_s": config.interval_s,
            "state": self.state.value,
            "last_status": self.last_status,
            "etag": self.etag,
            "last_modified": self.last_modified,
            "last_poll_ms": self.last_poll_ms,
            "last_success_ms": self.last_success_ms,
            "last_error": self.last_error,
            "last_rejected": [error.to_dict() for error in self.last_rejected],
            **vars(self.stats),
        }

    async def poll(self) -> PollResult:
        """One conditional GET and, on a 200, its events applied; never raises but for
        cancellation."""
        self.stats.polls += 1
        self.last_poll_ms = self.clock()
        try:
            return await self._poll()
        except (httpx.HTTPError, OSError) as exc:
            return self._failed(None, f"{type(exc).__name__}: {exc}")
        except FeedBodyError as exc:
            return self._failed(self.last_status, f"bad body: {exc}")
        except Exception as exc:  # the store or the bus failed the batch: nothing was kept
            log.exception("feed %s: the events could not be applied", self.config.where)
            return self._failed(self.last_status, f"not applied: {type(exc).__name__}: {exc}")

    async def _poll(self) -> PollResult:
        headers: dict[str, str] = {}
        if self.etag is not None:
            headers["If-None-Match"] = self.etag
        if self.last_modified is not None:
            headers["If-Modified-Since"] = self.last_modified
        async with self._client.stream("GET", self.config.url, headers=headers) as response:
            status = response.status_code
            self.last_status = status
            if status == 304:
                self._remember(response)
                self.stats.not_modified += 1
                return self._succeeded(PollResult(304, self.config.interval_s))
            if status == 429 or status >= 500:
                retry_after = _retry_after(response.headers.get("Retry-After"))
                return self._failed(status, f"HTTP {status}", retry_after)
            if not 200 <= status < 300:
                return self._refused(status)
            body = await self._read(response)
        fmt = detect_format(self.config, response.headers.get("Content-Type"), body)
        batch = await asyncio.to_thread(parse_feed, body, fmt, self.config.source)
        result = await self._apply(status, batch)
        self._remember(response)
        self.stats.fetched += 1
        return self._succeeded(result)

    async def _read(self, response: httpx.Response) -> bytes:
        limit = self.config.max_bytes
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise FeedBodyError(f"larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _apply(self, status: int, batch: FeedBatch) -> PollResult:
        rejected = list(batch.rejected)
        applied = duplicates = 0
        for start in range(0, len(batch.events), SUBMIT_CHUNK):
            chunk = batch.events[start : start + SUBMIT_CHUNK]
            results = await self.apply([event for _, event in chunk])
            for (index, event), result in zip(chunk, results, strict=True):
                if result.outcome is Outcome.APPLIED:
                    applied += 1
                elif result.outcome is Outcome.DUPLICATE:
                    duplicates += 1
                else:
                    rejected.append(_store_error(index, event, result))
        rejected.sort(key=lambda error: error.index)
        self.stats.applied += applied
        self.stats.duplicates += duplicates
        self.stats.rejected += len(rejected)
        self.last_rejected = rejected[:SHOWN_REJECTIONS]
        self._log_rejected(rejected)
        return PollResult(status, self.config.interval_s, applied, duplicates, rejected)

    def _log_rejected(self, rejected: list[EventError]) -> None:
        for error in rejected[:LOGGED_REJECTIONS]:
            log.warning(
                "feed %s: event %d (%s) rejected: %s: %s",
                self.config.where,
                error.index,
                error.event_id or "no event_id",
                error.field,
                error.message,
            )
        if len(rejected) > LOGGED_REJECTIONS:
            log.warning(
                "feed %s: %d more events rejected",
                self.config.where,
                len(rejected) - LOGGED_REJECTIONS,
            )

    def _remember(self, response: httpx.Response) -> None:
        """The validators to send next time; a 304 that omits one keeps the one we had."""
        etag = response.headers.get("ETag")
        modified = response.headers.get("Last-Modified")
        if response.status_code == 304:
            self.etag = etag or self.etag
            self.last_modified = modified or self.last_modified
        else:
            self.etag, self.last_modified = etag, modified

    def _succeeded(self, result: PollResult) -> PollResult:
        self._attempt = 0
        self.state = FeedState.OK
        self.last_error = None
        self.last_success_ms = self.last_poll_ms
        return result

    def _failed(
        self, status: int | None, error: str, retry_after: float | None = None
    ) -> PollResult:
        self._attempt += 1
        self.stats.errors += 1
        self.state = FeedState.RETRYING
        self.last_status = status
        self.last_error = error
        if retry_after is not None:
            wait = max(retry_after, self.config.backoff.first_s)
        else:
            wait = self.config.backoff.delay(self._attempt, self._rng)
        log.warning("feed %s: %s; polling again in %.2f s", self.config.where, error, wait)
        return PollResult(status, wait, error=error)

    def _refused(self, status: int) -> PollResult:
        self._attempt = 0
        self.stats.errors += 1
        self.state = FeedState.FAILING
        self.last_error = f"HTTP {status}"
        wait = self.config.interval_s
        log.error(
            "feed %s: refused with HTTP %d; polling again in %g s", self.config.where, status, wait
        )
        return PollResult(status, wait, error=self.last_error)

    async def _run(self) -> None:
        while True:
            result = await self.poll()
            await asyncio.sleep(result.wait_s)


def _store_error(index: int, event: Event, result: EventResult) -> EventError:
    error = result.error
    return EventError(
        index,
        error.field if error else "(event)",
        error.message if error else "not stored",
        event.event_id,
    )


def _retry_after(header: str | None) -> float | None:
    """Retry-After in seconds (RFC 9110: a number of seconds or an HTTP date), at most
    MAX_RETRY_AFTER_S; None when absent or unreadable, so the backoff decides."""
    if header is None:
        return None
    header = header.strip()
    if header.isascii() and header.isdigit():
        return min(float(header), MAX_RETRY_AFTER_S)
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    seconds = moment.timestamp() - now_ms() / 1000
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
