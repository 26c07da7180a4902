"""Convert jbenigeri/Video-Game-Price-Analysis's Steam price history (EUR, from the
IsThereAnyDeal API) into a worthit import file.

The repository commits `data/cleanup/steam_historical_prices.csv`: one row per price
*change* of a game on Steam (EU store, euros), July to October 2025, with the regular
price beside it. worthit's 30- and 90-day windows read observations, not changes, so each
game's price is carried forward one observation a day (at the time of day of its last
change, 12:00 UTC for carried days) from its first change to the last day of the file:
that is what a tracker polling once a day would have recorded.

The script reads the fetched mirror with `git show` (no work tree there) and writes JSONL
to a file of our own; nothing of theirs is copied into this repository.

    python bench/markets/steam_itad.py \
        --git-dir /work/.mirror/jbenigeri+Video-Game-Price-Analysis/repo \
        --out var/steam.jsonl [--limit 400]
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

from converter import converter_parser, noon, price_line

PATH = "data/cleanup/steam_historical_prices.csv"
CURRENCY = "EUR"


def git_show(git_dir: str, rev: str, path: str) -> str:
    """One file of the mirror at `rev`, as text."""
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{rev}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def _sku(game_id: str) -> str:
    return f"steam-{game_id[-12:]}"


def _chosen(game_id: str, limit: int | None, ranks: dict[str, int]) -> bool:
    """A fixed pseudo-random subset (by hash of the id), so that a limit picks the same
    games every run and picks them without looking at their prices."""
    return limit is None or ranks[game_id] < limit


def convert(text: str, limit: int | None) -> list[dict[str, object]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    games: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        games[row["ITAD Game ID"]].append(row)
    order = sorted(games, key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    ranks = {g: i for i, g in enumerate(order)}
    end = max(datetime.fromisoformat(r["Date"]) for r in rows).astimezone(UTC).date()
    out: list[dict[str, object]] = []
    for game_id in sorted(games, key=lambda g: ranks[g]):
        if not _chosen(game_id, limit, ranks):
            continue
        changes = sorted(games[game_id], key=lambda r: datetime.fromisoformat(r["Date"]))
        first = changes[0]
        tags = [t.strip() for t in first.get("ITAD Tags", "").split(",") if t.strip()]
        publishers = [p.strip() for p in first.get("ITAD Publishers", "").split(",") if p.strip()]
        sku = _sku(game_id)
        out.append({
            "type": "product", "sku": sku, "title": first["Game Name"].strip() or sku,
            "brand": publishers[0] if publishers else "", "category": tags[0] if tags else "game",
            "attributes": {"itad_id": game_id, "shop": "Steam EU"},
        })  # fmt: skip
        out.extend(_daily(sku, changes, end))
    return out


def _daily(sku: str, changes: list[dict[str, str]], end: date) -> list[dict[str, object]]:
    """The price as of each day from the first change to `end`: the change itself on a day
    that has one (the last of that day), the carried price at 12:00 UTC otherwise."""
    by_day: dict[date, tuple[datetime, float, float]] = {}
    for row in changes:
        at = datetime.fromisoformat(row["Date"]).astimezone(UTC)
        by_day[at.date()] = (at, float(row["Price (€)"]), float(row["Original Price (€)"]))
    day = min(by_day)
    current: tuple[datetime, float, float] | None = None
    lines: list[dict[str, object]] = []
    while day <= end:
        if day in by_day:
            current = by_day[day]
            at = current[0]
        else:
            at = noon(day)
        assert current is not None
        price, regular = current[1], current[2]
        if price > 0:
            lines.append(price_line(sku, at, price, CURRENCY, regular))
        day += timedelta(days=1)
    return lines


def main() -> None:
    parser = converter_parser(__doc__)
    parser.add_argument("--limit", type=int, default=None, help="at most this many games")
    args = parser.parse_args()
    lines = convert(git_show(args.git_dir, args.rev, PATH), args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    products = sum(1 for x in lines if x["type"] == "product")
    print(f"{products} products, {len(lines) - products} prices -> {args.out}")


if __name__ == "__main__":
    main()
