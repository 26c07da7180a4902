"""Convert codeinthehole/food-scraper's Ocado price archive (GBP) into a worthit import file.

The repository is a git scraper: a daily GitHub workflow fetches a basket of Ocado
(British online supermarket) products and records each price *change* in
`data/archive.json` ({id: {"name", "prices": [{"date", "price"}]}}), from October 2022.
As with the Steam market, each product's price is carried forward one observation a day
(12:00 UTC) from its first recorded price to the archive's last recorded change, which is
what the daily scraper saw; on a day with two changes the later one stands.

The full mirror is too large for `fetch` (its chart images: 1.2 GB), so the script reads
the archive either from any clone's git directory (`--git-dir`, e.g. after
`git clone --depth 1 --filter=blob:none https://github.com/codeinthehole/food-scraper`)
or from a copy of the file (`--file`). Nothing of theirs is copied into this repository.

    python bench/markets/ocado.py --file /tmp/ocado/archive.json --out var/ocado.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
from datetime import date, timedelta
from pathlib import Path

from converter import noon, price_line

PATH = "data/archive.json"
CURRENCY = "GBP"


def read_archive(git_dir: str | None, rev: str, file: Path | None) -> dict[str, dict[str, object]]:
    if file is not None:
        text = file.read_text(encoding="utf-8")
    else:
        assert git_dir is not None
        text = subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{rev}:{PATH}"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    data: dict[str, dict[str, object]] = json.loads(text)
    return data


def convert(archive: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    changes: dict[str, dict[date, float]] = {}
    for item, entry in archive.items():
        by_day: dict[date, float] = {}
        for point in entry["prices"]:  # type: ignore[attr-defined]
            by_day[date.fromisoformat(point["date"])] = float(point["price"])
        changes[item] = by_day
    end = max(day for by_day in changes.values() for day in by_day)
    out: list[dict[str, object]] = []
    for item, entry in archive.items():
        sku = f"ocado-{item}"
        out.append({
            "type": "product", "sku": sku, "title": str(entry["name"]), "brand": "",
            "category": "groceries", "attributes": {"ocado_id": item, "shop": "Ocado"},
        })  # fmt: skip
        by_day = changes[item]
        day, price = min(by_day), 0.0
        while day <= end:
            price = by_day.get(day, price)
            if price > 0:
                out.append(price_line(sku, noon(day), price, CURRENCY))
            day += timedelta(days=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--git-dir", help="a clone's git directory")
    source.add_argument("--file", type=Path, help="a copy of data/archive.json")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    lines = convert(read_archive(args.git_dir, args.rev, args.file))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    products = sum(1 for x in lines if x["type"] == "product")
    print(f"{products} products, {len(lines) - products} prices -> {args.out}")


if __name__ == "__main__":
    main()
