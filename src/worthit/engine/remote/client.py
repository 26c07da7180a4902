"""A client for one OpenAI-compatible engine replica, streaming over HTTP.

Which wire a replica gets is read from its `GET /v1/models` (`owned_by`):

* worthit's own engine (`worthit engine serve`): `/v1/chat/completions` with the answer's
  start as a final assistant message and `continue_final_message` (vLLM's field, which
  worthit's chat API maps to the engine's `answer_prefix`: the same tokens as in process),
  plus worthit's `priority`, `deadline_ms` and `deadline_policy` "sentence". A refusal
  comes back as HTTP 503 `deadline_unmeetable` and is raised as `AdmissionRefusedError`.
* vLLM, SGLang, llama-server: the same chat request without worthit's fields (vLLM and
  SGLang honour `continue_final_message`; llama-server continues a final assistant
  message on its own). The deadline becomes `max_tokens` (from this replica's measured
  pace) and a client timeout: text cut by it ends "deadline", as worthit's engine cuts.
* llama_cpp.server (`owned_by: "me"`): its chat handler always closes the last message
  and opens a new assistant turn, so it cannot continue an answer; it gets
  `/v1/completions` with the prompt rendered here by worthit's chat template (ChatML
  unless told otherwise: SmolLM2's and Qwen's), and a deadline becomes `max_tokens` as
  for the chat servers. It streams no usage: completion tokens are counted one a chunk,
  as it sends them.

Concurrency (slots.py): how many requests a replica is sent at once. llama_cpp.server
runs one at a time and, by default, ends the running stream when any other request
arrives (`[DONE]` with no finish_reason), so it gets one; llama-server (`owned_by:
"llamacpp"`) gets its `total_slots` from `GET /props`; the others batch and get no limit.
`?concurrency=N` on the base URL says it outright (`--engine URL?concurrency=1`). While a
one-at-a-time replica is busy its probe waits: its requests report its health. A stream
a peer ends with `[DONE]` and no finish_reason was interrupted by some other client's
request: "abort", not a failure of the replica.

Every wire carries the tenant as OpenAI's `user` (the end user's id, which vLLM, SGLang,
llama-server and llama_cpp.server accept): a worthit replica shares itself fairly between
tenants by it, as the engine in process does.

Failures: one retry on a connect failure (refused, timed out), never once the request
was sent, so a token is never produced twice; every other failure (the replica died
mid-stream, a read timed out, a 5xx) ends the stream with finish_reason "error", which
the answer flow turns into its template. Abort closes the HTTP stream.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx
import orjson
from httpx_sse import EventSource

from worthit.engine.chat import CHATML, ChatMessage, ChatTemplate
from worthit.engine.errors import AdmissionRefusedError, EngineError, PromptTooLongError
from worthit.engine.remote.slots import Slot, Slots
from worthit.engine.sequence import FinishReason, Priority, SamplingParams
from worthit.engine.streams import Completion, Delta

log = logging.getLogger(__name__)

CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
"""Failures before the request left: the only ones worth one more try."""


class EngineUnavailableError(EngineError):
    """A replica did not answer its model list (down, or not an OpenAI-compatible server)."""


class Wire(enum.StrEnum):
    WORTHIT = "worthit"
    CHAT = "chat"
    COMPLETIONS = "completions"


OWNERS = {"worthit": Wire.WORTHIT, "me": Wire.COMPLETIONS}
"""`owned_by` in /v1/models → wire; anything else speaks OpenAI chat."""
LLAMA_CPP_PYTHON = "me"
"""llama_cpp.server's `owned_by`: one request at a time, a new one interrupts it."""
LLAMA_SERVER = "llamacpp"
"""llama-server's `owned_by`: `GET /props` says how many slots it runs at once."""


def engine_address(url: str) -> tuple[str, int | None]:
    """`--engine URL` → its OpenAI base URL and the concurrency its `?concurrency=N`
    states (None: learnt from the replica). ValueError names what is wrong."""
    parts = urlsplit(url)
    concurrency: int | None = None
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name != "concurrency":
            raise ValueError(f"unknown engine option {name!r} (known: concurrency)")
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"concurrency must be a whole number >= 1, not {value!r}")
        concurrency = int(value)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")
    return base, concurrency


@dataclass(frozen=True)
class RemoteTimeouts:
    connect_s: float = 1.0
    read_s: float = 10.0
    """The longest silence between two chunks of an interactive request."""
    background_read_s: float = 300.0
    """The same for a background request, which a worthit replica pauses while interactive work
    runs: a pause is not a failure."""
    probe_s: float = 2.0
    """A health probe's whole budget."""

    def for_request(self, priority: Priority, left_s: float | None = None) -> httpx.Timeout:
        """An interactive request's silence may last as long as its deadline allows (`left_s`,
        which ends it in time anyway): a long prompt's prefill is silence too."""
        read = self.background_read_s if priority.is_background else self.read_s
        if left_s is not None:
            read = max(read, left_s + self.grace_s)
        return httpx.Timeout(read, connect=self.connect_s)

    grace_s: float = 0.5
    """How long past its deadline a worthit replica, which stops itself, is waited for."""


@dataclass
class Pace:
    """A replica's measured speed (moving averages): what maps a deadline to max_tokens
    for servers that take no deadline."""

    ttft_s: float = 0.3
    token_s: float = 0.05
    weight: float = 0.2

    def observe(self, ttft_s: float | None, tokens: int, e2e_s: float) -> None:
        if ttft_s is None:
            return
        self.ttft_s += self.weight * (ttft_s - self.ttft_s)
        if tokens > 1:
            per_token = (e2e_s - ttft_s) / (tokens - 1)
            self.token_s += self.weight * (per_token - self.token_s)

    def tokens_by(self, deadline_s: float) -> int:
        return max(1, int((deadline_s - self.ttft_s) / max(self.token_s, 1e-4)))


@dataclass
class Health:
    """Consecutive failures of one replica; ejected at `threshold`, readmitted by a probe."""

    threshold: int = 2
    failures: int = 0
    ejected: bool = False
    ejected_at: float | None = None
    """time.monotonic() of the ejection."""
    ejections: int = 0

    def record(self, ok: bool) -> None:
        if ok:
            self.failures = 0
            self.ejected = False
            return
        self.failures += 1
        if self.failures >= self.threshold and not self.ejected:
            self.ejected = True
            self.ejected_at = time.monotonic()
            self.ejections += 1


class RemoteEngine:
    """One replica at `base_url` (the OpenAI base, e.g. http://127.0.0.1:8001/v1).
    `connect()` reads its model id and wire before the first `submit`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeouts: RemoteTimeouts | None = None,
        template: ChatTemplate | None = None,
        client: httpx.AsyncClient | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.base_url, stated = engine_address(base_url)
        self.stated_concurrency = concurrency if concurrency is not None else stated
        """Requests at once as configured (None: as the replica's kind says, `connect`)."""
        self.slots = Slots(self.stated_concurrency)
        self.timeouts = timeouts or RemoteTimeouts()
        self.template = template or ChatTemplate(CHATML)
        self.model_id = ""
        self.wire = Wire.CHAT
        self.connected = False
        """True once `connect()` has read the model id and the wire."""
        self.pace = Pace()
        self.health = Health()
        self.in_flight = 0
        """Requests placed here and not yet ended: the router's load."""
        self.on_end: Callable[[str, FinishReason, float | None], None] | None = None
        """Told of each stream placed here as it ends (this base URL, its finish reason,
        its time to first token): the router's metrics. A refusal is no end."""
        t = self.timeouts
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(t.read_s, connect=t.connect_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    def __repr__(self) -> str:
        return f"RemoteEngine({self.base_url!r})"

    async def connect(self) -> str:
        """Read the replica's model id and pick its wire; EngineUnavailableError if it
        does not answer."""
        try:
            response = await self._client.get(f"{self.base_url}/models")
            response.raise_for_status()
            first = response.json()["data"][0]
            self.model_id = str(first["id"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise EngineUnavailableError(f"{self.base_url}/models: {exc!r}") from None
        owner = str(first.get("owned_by", ""))
        self.wire = OWNERS.get(owner, Wire.CHAT)
        if self.stated_concurrency is None:
            self.slots.limit = await self._learn_concurrency(owner)
        self.connected = True
        return self.model_id

    async def _learn_concurrency(self, owner: str) -> int | None:
        """How many requests the replica's kind runs at once; None: it batches and queues."""
        if owner == LLAMA_CPP_PYTHON:
            return 1
        if owner != LLAMA_SERVER:
            return None
        try:
            props = await self._client.get(
                self.base_url.removesuffix("/v1") + "/props", timeout=self.timeouts.probe_s
            )
            slots = props.json().get("total_slots")
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return slots if isinstance(slots, int) and slots >= 1 else None

    async def probe(self) -> bool:
        """A health check: the model list answers with the model we route for. It takes
        a slot like a request (a GET interrupts llama_cpp.server's running stream), and
        is skipped while none is free: the requests holding them report the health."""
        slot = self.slots.try_acquire()
        if slot is None:
            return not self.health.ejected
        try:
            response = await self._client.get(
                f"{self.base_url}/models", timeout=self.timeouts.probe_s
            )
            ok = response.status_code == 200 and any(
                str(m.get("id")) == self.model_id for m in response.json().get("data", [])
            )
        except (httpx.HTTPError, ValueError, AttributeError):
            ok = False
        finally:
            slot.release()
        self.health.record(ok)
        return ok

    async def aclose(self) -> None:
        await self._client.aclose()

    def ended(self, finish: FinishReason | None, ttft_s: float | None) -> None:
        """A stream placed here ended (finish None: refused, or raised before its end)."""
        self.in_flight -= 1
        if finish is not None and self.on_end is not None:
            self.on_end(self.base_url, finish, ttft_s)

    def submit(
        self,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        answer_prefix: str = "",
        tenant: str | None = None,
    ) -> RemoteStream:
        """Queue nothing yet: the request leaves when the stream is first read."""
        return self.submit_to(
            [self, self], messages=messages, params=params, priority=priority,
            deadline_s=deadline_s, answer_prefix=answer_prefix, tenant=tenant,
        )  # fmt: skip

    def submit_to(
        self,
        targets: Sequence[RemoteEngine],
        *,
        messages: Sequence[ChatMessage] | None,
        params: SamplingParams | None,
        priority: Priority,
        deadline_s: float | None,
        answer_prefix: str,
        tenant: str | None = None,
    ) -> RemoteStream:
        """A stream that tries `targets[0]`, and `targets[1]` once if it cannot connect."""
        if messages is None:
            raise ValueError("a remote engine takes chat messages")
        if priority.is_background and deadline_s is not None:
            raise ValueError("background requests carry no deadline")
        request = _Request(
            list(messages), params or SamplingParams(), priority, deadline_s, answer_prefix,
            tenant,
        )  # fmt: skip
        return RemoteStream(request, list(targets))

    def _body(self, request: _Request, left_s: float | None) -> tuple[str, dict[str, Any]]:
        """The request's path and body; `left_s` is what is left of its deadline now."""
        params = request.params
        body: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if params.top_k:
            body["top_k"] = params.top_k
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if request.tenant is not None:
            body["user"] = request.tenant
        if self.wire is not Wire.WORTHIT and left_s is not None:
            body["max_tokens"] = min(params.max_tokens, self.pace.tokens_by(left_s))
        if self.wire is Wire.COMPLETIONS:
            body["prompt"] = self.template.render(request.messages) + request.answer_prefix
            return "/completions", body
        messages = [dict(m) for m in request.messages]
        if request.answer_prefix:
            messages.append({"role": "assistant", "content": request.answer_prefix})
            body |= {"continue_final_message": True, "add_generation_prompt": False}
        body["messages"] = messages
        if self.wire is Wire.WORTHIT:
            body["priority"] = request.priority.name.lower()
            body["deadline_policy"] = "sentence"
            if left_s is not None:
                body["deadline_ms"] = max(1, round(left_s * 1000))
        return "/chat/completions", body


@dataclass(frozen=True)
class _Request:
    messages: list[ChatMessage]
    params: SamplingParams
    priority: Priority
    deadline_s: float | None
    answer_prefix: str
    tenant: str | None


class _ReplicaFailedError(Exception):
    """The replica failed this request (it counts against the replica's health)."""


class _PreemptedError(Exception):
    """An interactive request took this background request's slot."""


class RemoteStream:
    """A `TokenStream` over one HTTP response. A refusal or a prompt too long is raised
    from the first read; any other failure is the last delta, finish_reason "error"."""

    def __init__(self, request: _Request, targets: list[RemoteEngine]) -> None:
        self.request_id = uuid.uuid4().hex
        self.completion: Completion | None = None
        self.replica: RemoteEngine = targets[0]
        """Where the request went (the second target after a connect failure)."""
        self._request = request
        self._targets = targets
        self._started = time.monotonic()
        self._sent = self._started
        """When the request left: after the wait for a slot on a replica that limits them."""
        self._deadline = None if request.deadline_s is None else self._started + request.deadline_s
        self._events: AsyncGenerator[Delta, None] | None = None
        self._done = False
        self._closing: set[asyncio.Task[None]] = set()
        self._slot: Slot | None = None
        targets[0].in_flight += 1

    def __aiter__(self) -> RemoteStream:
        return self

    async def __anext__(self) -> Delta:
        if self._done:
            raise StopAsyncIteration
        if self._events is None:
            self._events = self._run()
        try:
            delta = await anext(self._events)
        except BaseException:
            self._end(None)
            raise
        if delta.finish_reason is not None:
            self._end(delta.finish_reason)
            await self._events.aclose()  # the connection goes back to the pool now
        return delta

    def abort(self) -> None:
        """Close the HTTP stream: a worthit replica aborts the request when it sees that."""
        if self._done:
            return
        self._end(FinishReason.ABORT)
        if self._events is not None:
            closing = asyncio.get_running_loop().create_task(self._events.aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    def _end(self, finish: FinishReason | None) -> None:
        if self._slot is not None:
            self._slot.release()
        if not self._done:
            self._done = True
            done = self.completion
            self.replica.ended(finish, None if done is None else done.ttft_s)

    async def _run(self) -> AsyncGenerator[Delta, None]:
        for attempt, replica in enumerate(self._targets[:2]):
            if replica is not self.replica:
                self.replica.in_flight -= 1
                replica.in_flight += 1
                self.replica = replica
            if self._slot is not None:
                self._slot.release()
            self._slot = await self._take_slot(replica)
            if self._slot is None:  # the deadline passed while the replica was busy
                self.completion = self._completion("", FinishReason.EXPIRED, {}, {}, 0, None)
                yield Delta(self.request_id, "", (), FinishReason.EXPIRED)
                return
            self._sent = time.monotonic()
            left = None if self._deadline is None else max(0.001, self._deadline - self._sent)
            path, body = replica._body(self._request, left)
            http = replica._client
            try:
                request = http.build_request(
                    "POST",
                    replica.base_url + path,
                    content=orjson.dumps(body),
                    headers={"content-type": "application/json"},
                    timeout=replica.timeouts.for_request(self._request.priority, left),
                )
                response = await http.send(request, stream=True)
            except CONNECT_ERRORS as exc:
                replica.health.record(False)
                log.warning("engine %s: cannot connect (%r)", replica.base_url, exc)
                if attempt + 1 < min(2, len(self._targets)):
                    continue
                yield self._failed()
                return
            except httpx.HTTPError as exc:
                replica.health.record(False)
                log.warning("engine %s: %r", replica.base_url, exc)
                yield self._failed()
                return
            try:
                async with aclosing(self._read(replica, response)) as deltas:
                    async for delta in deltas:
                        yield delta
            except _ReplicaFailedError as exc:
                replica.health.record(False)
                log.warning("engine %s failed mid-request: %s", replica.base_url, exc)
                yield self._failed()
            finally:
                await response.aclose()
            return

    async def _take_slot(self, replica: RemoteEngine) -> Slot | None:
        """A slot on `replica` (at once unless its concurrency is known and used up);
        None when the deadline passes first."""
        taking = replica.slots.acquire(self._request.priority)
        if self._deadline is None:
            return await taking
        try:
            return await asyncio.wait_for(taking, max(0.0, self._deadline - time.monotonic()))
        except TimeoutError:
            return None

    async def _read(
        self, replica: RemoteEngine, response: httpx.Response
    ) -> AsyncGenerator[Delta, None]:
        if response.status_code != 200:
            await response.aread()
            _raise_refusal(replica, response)
        text: list[str] = []
        chunks = 0
        finish: FinishReason | None = None
        usage: dict[str, Any] = {}
        evidence: dict[str, Any] = {}
        ttft: float | None = None
        events = EventSource(response).aiter_sse()
        grace = replica.timeouts.grace_s if replica.wire is Wire.WORTHIT else 0.0
        while True:
            try:
                event = await self._next_event(events, grace)
            except StopAsyncIteration:
                break
            except TimeoutError:
                finish = FinishReason.DEADLINE if text else FinishReason.EXPIRED
                break
            except _PreemptedError:
                finish = FinishReason.ABORT
                break
            except httpx.HTTPError as exc:
                raise _ReplicaFailedError(repr(exc)) from None
            if event.data.strip() == "[DONE]":
                if finish is None:  # cut off for another client's request: alive
                    log.warning("engine %s interrupted a request (another client's "
                                "request arrived)", replica.base_url)  # fmt: skip
                    finish = FinishReason.ABORT
                break
            try:
                data = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                raise _ReplicaFailedError(f"not JSON: {event.data[:80]!r}") from None
            if "error" in data:
                raise _ReplicaFailedError(str(data["error"]))
            usage = data.get("usage") or usage
            evidence = data.get("worthit") or evidence
            for choice in data.get("choices") or ():
                piece = _piece(choice)
                if piece:
                    if ttft is None:
                        ttft = time.monotonic() - self._started
                    text.append(piece)
                    chunks += 1
                    yield Delta(self.request_id, piece, ())
                if choice.get("finish_reason"):
                    finish = _finish(str(choice["finish_reason"]))
        if finish is None:
            raise _ReplicaFailedError("the stream ended without a finish_reason")
        replica.health.record(True)
        self.completion = self._completion("".join(text), finish, usage, evidence, chunks, ttft)
        waited = self._sent - self._started  # the replica's pace counts from the request
        replica.pace.observe(
            None if ttft is None else ttft - waited,
            self.completion.completion_tokens,
            self.completion.e2e_s - waited,
        )
        yield Delta(self.request_id, "", (), finish)

    async def _next_event(self, events: AsyncIterator[Any], grace: float) -> Any:
        """The next SSE event; TimeoutError past the deadline (and `grace`),
        _PreemptedError once an interactive request wants this one's slot."""
        left = None if self._deadline is None else self._deadline + grace - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError
        slot = self._slot
        if slot is None or not slot.preemptible:
            return await (anext(events) if left is None else asyncio.wait_for(anext(events), left))
        if slot.preempted.is_set():
            raise _PreemptedError
        following = asyncio.ensure_future(anext(events))
        preempted = asyncio.ensure_future(slot.preempted.wait())
        try:
            await asyncio.wait((following, preempted), timeout=left,
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            preempted.cancel()
        if following.done():
            return following.result()
        following.cancel()
        await asyncio.wait((following,))  # its end, whatever it is, is of no use now
        if slot.preempted.is_set():
            raise _PreemptedError
        raise TimeoutError

    def _failed(self) -> Delta:
        self.completion = self._completion("", FinishReason.ERROR, {}, {}, 0, None)
        return Delta(self.request_id, "", (), FinishReason.ERROR)

    def _completion(
        self,
        text: str,
        finish: FinishReason,
        usage: dict[str, Any],
        evidence: dict[str, Any],
        chunks: int,
        ttft_s: float | None,
    ) -> Completion:
        details = usage.get("prompt_tokens_details") or {}

        def seconds(key: str) -> float | None:
            value = evidence.get(key)
            return None if value is None else float(value) / 1000

        return Completion(
            request_id=self.request_id,
            text=text,
            token_ids=(),
            finish_reason=finish,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or chunks),
            cached_tokens=int(details.get("cached_tokens") or 0),
            truncated_messages=int(evidence.get("truncated_messages") or 0),
            preemptions=int(evidence.get("preemptions") or 0),
            queue_s=seconds("queue_ms") if "queue_ms" in evidence else self._sent - self._started,
            ttft_s=ttft_s,
            prefill_s=seconds("prefill_ms") or 0.0,
            e2e_s=time.monotonic() - self._started,
        )


def _piece(choice: dict[str, Any]) -> str | None:
    """The new text of a chat chunk's delta or a completion chunk."""
    piece = choice["text"] if "text" in choice else (choice.get("delta") or {}).get("content")
    return piece if isinstance(piece, str) else None


def _finish(value: str) -> FinishReason:
    try:
        return FinishReason(value)
    except ValueError:
        return FinishReason.STOP


def _raise_refusal(replica: RemoteEngine, response: httpx.Response) -> None:
    """A worthit refusal or a prompt too long as the engine's own errors (the replica is
    healthy: it answered); any other status is the replica failing the request."""
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = error.get("code") if isinstance(error, dict) else None
    message = str(error.get("message", "")) if isinstance(error, dict) else ""
    if response.status_code == 503 and code in ("deadline_unmeetable", "queue_full"):
        replica.health.record(True)
        reason = "deadline" if code == "deadline_unmeetable" else "queue_full"
        estimated, budget = error.get("estimated_ms"), error.get("budget_ms")
        raise AdmissionRefusedError(
            "remote", reason,
            None if estimated is None else float(estimated) / 1000,
            None if budget is None else float(budget) / 1000,
        )  # fmt: skip
    if response.status_code == 400 and code == "context_length_exceeded":
        replica.health.record(True)
        raise PromptTooLongError(int(error.get("n_tokens") or 0), int(error.get("limit") or 0))
    raise _ReplicaFailedError(f"HTTP {response.status_code}: {message or response.text[:200]}")
