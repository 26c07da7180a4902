"""Resuming a tenant's watch stream after a lost connection: event ids and the replay.

`GET /v1/watches/events` is live, but a shopper whose connection dropped for a moment
should still hear of the watch that fired meanwhile. So each `watch` event carries an
SSE id, `<fired ms>.<watch id>`, and `ready` carries `<ms>`, the moment the stream
subscribed; a client that reconnects with `Last-Event-ID` first gets the tenant's watches
fired since then, from the store (which keeps each fired watch's notification), then the
live ones. The id is made from the notification itself, so a replayed one has the id it
had live.

The replay reaches `REPLAY_OVERLAP_MS` back before the id's moment: a notification is
stamped (to the second) when its watch fires, but published after its round of
evaluation, so one stamped just before the id may not have been sent by then. A
notification may therefore come twice, as a webhook may: drop the ids already seen.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from worthit.text.time import to_ms
from worthit.watches.store import Watch, WatchState

REPLAY_OVERLAP_MS = 5_000
MAX_ID_CHARS = 200


def event_id(body: dict[str, Any]) -> str | None:
    """The SSE id of a notification; None for a body without its stamp or watch."""
    try:
        fired_ms = to_ms(datetime.fromisoformat(str(body["timestamp"])))
        watch_id = str(body["data"]["watch_id"])
    except (KeyError, TypeError, ValueError):
        return None
    return f"{fired_ms}.{watch_id}"


def ready_id(now_ms: int) -> str:
    return str(now_ms)


def since_ms(last_event_id: str | None) -> int | None:
    """The moment a `Last-Event-ID` stands for; None when absent or not one of ours."""
    if not last_event_id or len(last_event_id) > MAX_ID_CHARS:
        return None
    head = last_event_id.split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def missed(watches: list[Watch], last_event_id: str | None) -> list[dict[str, Any]]:
    """The notifications of fired `watches` a client that saw `last_event_id` may have
    missed, oldest first (but the one it names)."""
    since = since_ms(last_event_id)
    if since is None:
        return []
    found: list[tuple[int, str, dict[str, Any]]] = []
    for watch in watches:
        if watch.state is not WatchState.FIRED or watch.notification is None:
            continue
        if watch.fired_ms is None or watch.fired_ms < since - REPLAY_OVERLAP_MS:
            continue
        body = watch.notification
        if event_id(body) != last_event_id:
            found.append((watch.fired_ms, watch.watch_id, body))
    found.sort(key=lambda item: (item[0], item[1]))
    return [body for _, _, body in found]
