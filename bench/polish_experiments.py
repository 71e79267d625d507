#!/usr/bin/env python3
"""Run the Polish tokenizer experiments and the baselines on one validation split.

    .venv/bin/python bench/polish_experiments.py [--data data] [--out /tmp/polish-exp]
        [--only NAME ...] [--skip-baselines]

Makes (or reuses) the split of DATA/polish with tokpack's defaults, trains every variant of
``VARIANTS`` on its training part, writes each ``tokenizer.json`` under OUT/NAME/, grades it as
Hugging Face loads it on the validation part, and trains the baselines on the same training text.
Besides the graded figures it prints the *novel-lines* figure: the validation text with every line
that also occurs in training removed, which boilerplate cannot flatter. Results go to stdout as a
Markdown table and to OUT/results.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tokpack.grading import baselines
from tokpack.grading.files import corpus_files, read_document
from tokpack.grading.grade import TokenCounter, chars_per_token, grade, load_counter
from tokpack.grading.split import SPLIT_FILE, TRAIN, VALIDATION, normalize_text, plan_split, write_split
from tokpack.grading.training import (
    TrainingRecipe,
    train_tokenizer,
    weighted_documents,
    write_tokenizer,
)
from tokpack.vocab import GPT2_PATTERN
from tokpack.vocab.patterns import GPT4_PATTERN, POLISH_PATTERN

_TAIL = r""" ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
SPACE_DIGITS = r"""[^\r\n\p{L}\p{N}]?+\p{L}++|""" + _TAIL
NEWLINE_WORDS = r"""\n*+[^\r\n\p{L}\p{N}]?+\p{L}++|""" + _TAIL
_LEAD = r"""[\r\n]*+[ \t]*+"""
_PUNCT_AND_TAIL = _LEAD + r"""[^\s\p{L}\p{N}]++[\r\n]*+| ?\p{N}{1,3}|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
PHRASES_4_WORDS = _LEAD + r"""[^\r\n\p{L}\p{N}]?+\p{L}++(?: \p{L}++){0,3}|""" + _PUNCT_AND_TAIL
PHRASES_4_ACROSS_PUNCTUATION = (
    _LEAD + r"""[^\r\n\p{L}\p{N}]?+\p{L}++(?:[,.:;]?+ [^\r\n\p{L}\p{N}]?+\p{L}++){0,3}|""" + _PUNCT_AND_TAIL
)


@dataclass(frozen=True)
class Variant:
    name: str
    recipe: TrainingRecipe
    hypothesis: str
    with_english: bool = False


CODE_X2 = {"code": 2.0}


def _recipe(**changes: object) -> TrainingRecipe:
    # The experiments were run with the Polish pattern, once the recipe's default.
    return TrainingRecipe(vocab_size=8192, **{"pattern": POLISH_PATTERN, **changes})  # type: ignore[arg-type]


VARIANTS = [
    Variant("v0-gpt2", _recipe(pattern=GPT2_PATTERN), "reference point: GPT-2's pattern with tokpack's export"),
    Variant("v1-gpt4", _recipe(pattern=GPT4_PATTERN),
            "GPT-4's pattern (punctuation may lead a word, digits in threes) cuts Polish and code better"),
    Variant("v2-space-digits", _recipe(pattern=SPACE_DIGITS),
            "a space may lead a digit group, as it leads a word: ' 2' tokens save the space token"),
    Variant("v3-newline-words", _recipe(pattern=NEWLINE_WORDS),
            "newlines may lead a word: line and paragraph starts stop costing a token of their own"),
    Variant("v4-indented-words", _recipe(pattern=POLISH_PATTERN),
            "indentation (after newlines) may lead a word or a punctuation run: code and indented quotes"),
    Variant("v5-english", _recipe(pattern=POLISH_PATTERN),
            "adding other/english helps the English headings of technical pages", with_english=True),
    Variant("v6-code-x2", _recipe(pattern=POLISH_PATTERN, domain_weights=CODE_X2),
            "doubling code, the weakest domain, lifts it without costing much elsewhere"),
    Variant("v7-phrases-1500", _recipe(domain_weights=CODE_X2, phrase_merges=1500, phrase_pattern=PHRASES_4_WORDS),
            "a phrase stage (SuperBPE) of up to four space-joined words turns frequent phrases into tokens"),
    Variant("v8-phrases-3000", _recipe(domain_weights=CODE_X2, phrase_merges=3000, phrase_pattern=PHRASES_4_WORDS),
            "starting the phrase stage earlier (3000 ids instead of 1500) buys more phrases"),
    Variant("v9-phrases-punct", _recipe(domain_weights=CODE_X2, phrase_merges=1500, phrase_pattern=PHRASES_4_ACROSS_PUNCTUATION),
            "phrases may also run across ', ' and '. ' (', a następnie', '. W')"),
    Variant("v10-phrases-unbounded", _recipe(domain_weights=CODE_X2, phrase_merges=1500),
            "no limit on words per phrase: long recurring phrases become one token"),
    Variant("v11-narrative-x2", _recipe(domain_weights=CODE_X2 | {"narrative": 2.0}, phrase_merges=1500),
            "doubling narrative, now the weakest and smallest domain, lifts it at little cost"),
    Variant("v12-exact", _recipe(domain_weights=CODE_X2, phrase_merges=1500, trainer="exact"),
            "the exact trainer (ties to the lowest pair) learns as well as Hugging Face's"),
]


def _novel_lines(train_texts: list[str], validation_dir: Path) -> dict[str, list[str]]:
    seen = {normalize_text(line) for text in train_texts for line in text.splitlines()}
    listing = corpus_files(validation_dir)
    novel: dict[str, list[str]] = {}
    for domain, paths in listing.by_domain().items():
        for path in paths:
            kept = [line for line in read_document(path).splitlines(keepends=True) if normalize_text(line) not in seen]
            novel.setdefault(domain, []).append("".join(kept))
    return novel


def _novel_score(counter: TokenCounter, novel: dict[str, list[str]]) -> float:
    characters = sum(len(text) for texts in novel.values() for text in texts)
    tokens = sum(sum(counter.count(texts)) for texts in novel.values())
    return chars_per_token(characters, tokens)


def _row(name: str, counter: TokenCounter, validation: Path, novel: dict[str, list[str]], seconds: float) -> dict[str, object]:
    report = grade(counter, validation)
    return {
        "name": name,
        "vocab_size": report.vocab_size,
        "global": round(report.chars_per_token, 4),
        "domains": {d.domain: round(d.chars_per_token, 4) for d in report.domains},
        "weakest": report.weakest_domain,
        "weakest_score": round(min(d.chars_per_token for d in report.domains), 4),
        "novel_lines": round(_novel_score(counter, novel), 4),
        "seconds": round(seconds, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / "data")
    parser.add_argument("--out", type=Path, default=Path("/tmp/polish-exp"))
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--skip-baselines", action="store_true")
    args = parser.parse_args(argv)
    split_dir = args.out / "split"
    record = plan_split(args.data / "polish")
    if not (split_dir / SPLIT_FILE).is_file() or json.loads((split_dir / SPLIT_FILE).read_text())["validation"] != record.validation:
        write_split(record, split_dir, overwrite=True)
    train_dir, validation = split_dir / TRAIN, split_dir / VALIDATION
    plain_texts, _ = weighted_documents([train_dir], {})
    novel = _novel_lines(plain_texts, validation)
    rows: list[dict[str, object]] = []
    for variant in VARIANTS:
        if args.only and variant.name not in args.only:
            continue
        dirs = [train_dir] + ([args.data / "other"] if variant.with_english else [])
        weights = dict(variant.recipe.domain_weights)
        if variant.with_english:
            weights.update({"scripts": 0.0, "emoji": 0.0})
        started = time.perf_counter()
        try:
            texts, _ = weighted_documents(dirs, weights)
            tokenizer = train_tokenizer(texts, variant.recipe)
        except ValueError as error:
            print(f"{variant.name}: skipped ({error})", file=sys.stderr)
            continue
        out_json = args.out / variant.name / "tokenizer.json"
        write_tokenizer(tokenizer, out_json)
        row = _row(variant.name, load_counter(out_json), validation, novel, time.perf_counter() - started)
        rows.append(row | {"hypothesis": variant.hypothesis})
        print(json.dumps(row), flush=True)
    if not args.skip_baselines:
        makers = {
            "hf-default": lambda: baselines.hf_default_counter(plain_texts, 8192),
            "sentencepiece": lambda: baselines.sentencepiece_counter(plain_texts, 8192),
            "sentencepiece-lossless": lambda: baselines.sentencepiece_counter(plain_texts, 8192, lossless=True),
            "gpt2": lambda: baselines.gpt2_counter(),
        }
        for name, make in makers.items():
            started = time.perf_counter()
            row = _row(name, make(), validation, novel, 0.0)
            row["seconds"] = round(time.perf_counter() - started, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    domains = sorted({d for row in rows for d in row["domains"]})  # type: ignore[union-attr]
    print("\n| variant | global | " + " | ".join(domains) + " | weakest | novel lines |")
    print("|---" * (len(domains) + 4) + "|")
    for row in rows:
        cells = " | ".join(f"{row['domains'][d]:.3f}" for d in domains)  # type: ignore[index]
        print(f"| {row['name']} | {row['global']:.3f} | {cells} | {row['weakest']} {row['weakest_score']:.3f} | {row['novel_lines']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
