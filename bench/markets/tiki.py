"""Convert zaivi/ci-tracking-retails-price's Tiki and Shopee Vietnam observations (VND)
into a worthit import file.

The repository is a git scraper: a GitHub workflow polled 16 products of Tiki.vn and
Shopee.vn (the category here is the shop) about every half hour from 2023-06-05 to
2023-07-15 and appended each observation to `data/history/<itemid>.csv` (epoch `time`,
`price`, `price_before_discount`, `stock`, `item_status`); `data/info/<itemid>.yaml`
names the product. Each observation becomes a price line (the seller's
`price_before_discount` as `list_price` when higher) and a stock line. Read from the
fetched mirror with `git show`; nothing of theirs is copied here.

    python bench/markets/tiki.py \
        --git-dir /work/.mirror/zaivi+ci-tracking-retails-price/repo --out var/tiki.jsonl
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from datetime import UTC, datetime

import yaml  # type: ignore[import-untyped]
from converter import converter_parser, price_line

CURRENCY = "VND"


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def convert(git_dir: str, rev: str) -> list[dict[str, object]]:
    names = git(git_dir, "ls-tree", "--name-only", f"{rev}:data/history").split()
    out: list[dict[str, object]] = []
    for name in sorted(names):
        item = name.removesuffix(".csv")
        try:
            info = yaml.safe_load(git(git_dir, "show", f"{rev}:data/info/{item}.yaml")) or {}
        except subprocess.CalledProcessError:
            info = {}
        sku = f"tiki-{item}"
        out.append({
            "type": "product", "sku": sku, "title": str(info.get("name") or sku),
            "brand": "", "category": str(info.get("source") or "tiki"),
            "attributes": {"itemid": item, "shop": str(info.get("source") or "tiki")},
        })  # fmt: skip
        text = git(git_dir, "show", f"{rev}:data/history/{name}")
        seen: set[str] = set()
        for row in csv.DictReader(io.StringIO(text)):
            price = _number(row["price"])
            if price is None or row.get("item_status", "available") != "available":
                continue
            at = datetime.fromtimestamp(int(row["time"]), UTC)
            ts = at.isoformat().replace("+00:00", "Z")
            if ts in seen:
                continue
            seen.add(ts)
            before = _number(row.get("price_before_discount", ""))
            out.append(price_line(sku, at, price, CURRENCY, before))
            stock = _number(row.get("stock", ""))
            if stock is not None:
                out.append({"type": "stock", "sku": sku, "ts": ts, "quantity": int(stock)})
    return out


def main() -> None:
    parser = converter_parser(__doc__)
    args = parser.parse_args()
    lines = convert(args.git_dir, args.rev)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    products = sum(1 for x in lines if x["type"] == "product")
    print(f"{products} products, {len(lines) - products} observations -> {args.out}")


if __name__ == "__main__":
    main()
