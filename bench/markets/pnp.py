"""Convert HeelinMistry/grocery_price_tracker's Pick n Pay or Makro snapshots (ZAR) into a
worthit import file.

The repository is a git scraper: a weekly GitHub workflow lists about 10,000 products of
Pick n Pay (South African supermarket) online and commits the list as
`data/pnp_products_<YYYY-MM-DD>.csv` (store, name, price, old_price, promotion), from
July 2025, and the same of about 2,000 products of Makro (a South African wholesale and
retail chain) as `data/makro_products_<YYYY-MM-DD>.csv` (`--shop makro`; its lists have
no "was" price). Unlike the Steam and Ocado sources, these are observations a week apart, not
changes: what the price did between two snapshots is not known. Each snapshot's price is
carried forward one observation a day (12:00 UTC) until the product's next snapshot, as
a daily tracker would have recorded a shop whose prices held for the week, and for at most
`MAX_CARRY_DAYS`, so that a product missing from later lists (the scrape keeps the first
10,000 it is shown) goes stale instead of holding an old price for months.

- The product is its name: the files carry no id. A name listed twice in one snapshot
  (about 20 a week) is ambiguous and left out.
- `price` is what one unit costs; `old_price`, where higher, is the shop's "was" price
  (`list_price`). `promotion` (multi-buys, "Smart Price" loyalty-card prices) is not a
  price one unit costs without a basket or a card, so it is not imported.
- `--min-weeks` keeps products listed in at least that many snapshots, `--limit N` keeps
  N of those chosen by a hash of their name (not by their prices), for a replay of
  reasonable size.

The script reads the fetched mirror with `git show` (no work tree there) and writes JSONL
to a file of our own; nothing of theirs is copied into this repository.

    python bench/markets/pnp.py \
        --git-dir /work/.mirror/HeelinMistry+grocery_price_tracker/repo \
        --out var/pnp.jsonl --limit 1000 [--shop makro]
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import subprocess
from collections import Counter
from datetime import date, timedelta

from converter import converter_parser, noon, price_line

CURRENCY = "ZAR"
SHOPS = {"pnp": "Pick n Pay", "makro": "Makro"}
MAX_CARRY_DAYS = 13
"""A weekly list missed once (2025-08-28 holds 72 rows) is bridged; a longer absence is not."""


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


Snapshot = dict[str, tuple[float, float | None]]
"""name -> (price, was price or None)."""


def read_snapshots(git_dir: str, rev: str, shop: str = "pnp") -> dict[date, Snapshot]:
    """Every snapshot of `shop` at `rev`, by day; names listed twice in one are dropped."""
    pattern = re.compile(rf"^data/{shop}_products_(\d{{4}}-\d{{2}}-\d{{2}})\.csv$")
    paths = _git(git_dir, "ls-tree", "-r", "--name-only", rev, "data/").split()
    out: dict[date, Snapshot] = {}
    for path in paths:
        match = pattern.match(path)
        if match is None:
            continue
        rows = list(csv.DictReader(io.StringIO(_git(git_dir, "show", f"{rev}:{path}"))))
        twice = {k for k, n in Counter(r["name"].strip() for r in rows).items() if n > 1}
        snapshot: Snapshot = {}
        for row in rows:
            name = row["name"].strip()
            price = _amount(row["price"])
            if not name or name in twice or price is None or price <= 0:
                continue
            was = _amount(row["old_price"])
            snapshot[name] = (price, was if was is not None and was > price else None)
        out[date.fromisoformat(match.group(1))] = snapshot
    return out


def _amount(text: str | None) -> float | None:
    try:
        return round(float(text), 2) if text and text.strip() else None
    except ValueError:
        return None


def _rank(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def convert(
    snapshots: dict[date, Snapshot], min_weeks: int, limit: int | None, shop: str = "pnp"
) -> list[dict[str, object]]:
    days = sorted(snapshots)
    listed = Counter(name for snapshot in snapshots.values() for name in snapshot)
    names = sorted((k for k, n in listed.items() if n >= min_weeks), key=_rank)
    if limit is not None:
        names = names[:limit]
    end = days[-1]
    out: list[dict[str, object]] = []
    for name in names:
        sku = f"{shop}-{_rank(name)[:12]}"
        out.append({
            "type": "product", "sku": sku, "title": name, "brand": "", "category": "groceries",
            "attributes": {"shop": SHOPS[shop]},
        })  # fmt: skip
        seen = [d for d in days if name in snapshots[d]]
        for i, day in enumerate(seen):
            price, was = snapshots[day][name]
            until = seen[i + 1] if i + 1 < len(seen) else end + timedelta(days=1)
            until = min(until, day + timedelta(days=MAX_CARRY_DAYS + 1))
            while day < until:
                out.append(price_line(sku, noon(day), price, CURRENCY, was))
                day += timedelta(days=1)
    return out


def main() -> None:
    parser = converter_parser(__doc__)
    parser.add_argument("--shop", choices=sorted(SHOPS), default="pnp")
    parser.add_argument("--min-weeks", type=int, default=16,
                        help="keep products listed in at least this many snapshots")  # fmt: skip
    parser.add_argument("--limit", type=int, default=None, help="at most this many products")
    args = parser.parse_args()
    snapshots = read_snapshots(args.git_dir, args.rev, args.shop)
    lines = convert(snapshots, args.min_weeks, args.limit, args.shop)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    products = sum(1 for x in lines if x["type"] == "product")
    print(
        f"{len(snapshots)} snapshots, {products} products, {len(lines) - products} prices"
        f" -> {args.out}"
    )


if __name__ == "__main__":
    main()
