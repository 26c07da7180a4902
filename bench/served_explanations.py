"""Explanations a store would serve now, drawn at random, each beside its verdict's
reasons: what a person reads to judge them (issue 25 asks for 100 a language).

Only texts stored under the key of the product's current prompt are drawn (what an answer
would stream now); texts whose inputs have moved since they were written are counted and
skipped, and so are texts the checks an answer runs before streaming a stored text
(`ExplanationRun.recheck`, today's checker) now refuse: a shopper gets the template there.
The model identity is the service's default (the bundled model's upcast and the shipped
adapter), as `worthit serve` computes it.

    .venv/bin/python bench/served_explanations.py --db var/demo.db --count 50 --seed 25
"""

from __future__ import annotations

import argparse
import collections
import random
import sqlite3
import sys

from worthit.answer.background import QUESTIONS
from worthit.cli.options import model_files
from worthit.explain.explainer import ExplanationRun
from worthit.explain.store_key import model_identity
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--language", default=None, help="en or zh (default: any)")
    args = parser.parse_args()
    with sqlite3.connect(args.db) as conn:
        rows = conn.execute(
            "SELECT key, sku, language, verdict, text FROM explanations"
            " WHERE text IS NOT NULL ORDER BY sku, language"
        ).fetchall()
    random.Random(args.seed).shuffle(rows)
    model, lora = model_files(None, None)
    answerer = build_answerer(MarketStore(args.db), None, model=model_identity(model, lora))
    shown = stale = 0
    refused: collections.Counter[str] = collections.Counter()
    for key, sku, language, verdict, text in rows:
        if shown == args.count:
            break
        if args.language and language != args.language:
            continue
        decision = answerer.decider.decide(QUESTIONS[language], sku=sku, language=language)
        current = decision.verdict
        if current is None or decision.sheet is None:
            stale += 1
            continue
        run = ExplanationRun(decision.sheet, current)
        if answerer.key(run) != key:
            stale += 1
            continue
        why = run.recheck(text)
        if why is not None:
            refused[why[0]] += 1
            print(f"refused {sku} {language} {verdict} ({why[0]}): {text}", file=sys.stderr)
            continue
        shown += 1
        print(f"## {shown}. {sku} {language} {verdict}")
        for reason in current.reasons:
            print(f"   - {reason.text}")
        print(f"   TEXT: {text}\n")
    print(
        f"{shown} served now, {stale} stale skipped, {sum(refused.values())} refused by "
        f"today's checks {dict(refused)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
