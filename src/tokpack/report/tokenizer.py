"""The report of a tokenizer: its compression per domain (against baselines, and against targets
when there are any: the user's, or the Polish recipe's for a tokenizer made by it), and its
longest and most frequent tokens, shown readably."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokpack._schema import read_record
from tokpack.report.page import escape, page, table
from tokpack.report.plots import bars

_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "→", "\r": "␍"}


def readable(token: bytes) -> str:
    """A token's bytes as text a person can read: UTF-8 where it decodes, ``\\xNN`` escapes where
    it does not, and spaces, newlines and tabs made visible.

    >>> readable(b" kot\\n"), readable("ż".encode()[:1] + b"a")
    ('␣kot⏎', '\\\\xc5a')
    """
    out, position = [], 0
    while position < len(token):
        for width in (1, 2, 3, 4):
            try:
                char = token[position : position + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(_VISIBLE.get(char, char if char.isprintable() else f"\\u{ord(char):04x}"))
            position += width
            break
        else:
            out.append(f"\\x{token[position]:02x}")
            position += 1
    return "".join(out)


@dataclass(frozen=True)
class Targets:
    """Least characters per token a grade is held to (globally, per domain; ``None``: no such
    target), and whose they are, as the report says it."""

    min_global: float | None
    min_domain: float | None
    whose: str


def recipe_targets(path: Path) -> Targets | None:
    """The Polish recipe's targets (:data:`tokpack.grading.grade.MIN_GLOBAL`, ``MIN_DOMAIN``) when
    the tokenizer at ``path`` was made by that recipe (the ``manifest.json`` beside it records its
    identity and the Polish pattern), else ``None``: no tokenizer is graded against another's targets."""
    from tokpack.grading.grade import MIN_DOMAIN, MIN_GLOBAL
    from tokpack.grading.manifest import TokenizerManifest
    from tokpack.vocab.loading import load_vocabulary
    from tokpack.vocab.patterns import POLISH_PATTERN

    beside = Path(path).parent / "manifest.json"
    try:
        manifest = read_record(TokenizerManifest, beside) if beside.is_file() else None
    except ValueError:  # another tool's manifest.json
        return None
    if manifest is None or manifest.recipe.pattern != POLISH_PATTERN or manifest.identity != load_vocabulary(path).identity:
        return None
    return Targets(MIN_GLOBAL, MIN_DOMAIN, "the Polish recipe's targets (docs/polish-tokenizer.md)")


def tokenizer_facts(path: Path, *, data: Path | None, baselines: Sequence[Path] = (), top: int = 20,
                    targets: Targets | None = None) -> dict[str, Any]:
    """Identity, grade (when ``data`` is given; held to ``targets`` if any), baselines' grades,
    longest and most frequent tokens."""
    from tokpack.grading.grade import GradeReport, TokenCounter, grade
    from tokpack.vocab.loading import load_vocabulary

    tokenizer = load_vocabulary(path)
    by_length = sorted(tokenizer.ranks.items(), key=lambda item: (-len(item[0]), item[1]))[:top]
    facts: dict[str, Any] = {
        "tokenizer": str(path),
        "vocabulary": tokenizer.identity.model_dump(mode="json", by_alias=True),
        "longest": [{"id": rank, "bytes": len(token), "text": readable(token)} for token, rank in by_length],
        "grade": None,
        "baselines": [read_record(GradeReport, Path(b)).model_dump(mode="json", by_alias=True) for b in baselines],
        "frequent": [],
    }
    if data is not None:
        counts = np.zeros(tokenizer.n_vocab, dtype=np.int64)

        def count(texts: Sequence[str]) -> list[int]:  # one encoding serves the grade and the frequencies
            encoded = tokenizer.encode_arrays(list(texts))
            if encoded:
                counts[:] += np.bincount(np.concatenate(encoded), minlength=tokenizer.n_vocab)
            return [len(ids) for ids in encoded]

        counter = TokenCounter(name=str(path), vocab_size=tokenizer.n_vocab, count=count)
        # A target not given holds nothing back (0 characters per token).
        graded = grade(counter, data, min_global=targets.min_global or 0.0 if targets else 0.0,
                       min_domain=targets.min_domain or 0.0 if targets else 0.0).model_dump(mode="json", by_alias=True)
        if targets is None:  # no targets: no verdict to show
            graded = {**graded, "min_global": None, "min_domain": None, "passed": None,
                      "domains": [{**domain, "passed": None} for domain in graded["domains"]]}
        else:
            graded = {**graded, "min_global": targets.min_global, "min_domain": targets.min_domain, "whose": targets.whose}
        facts["grade"] = graded
        spelled = {rank: token for token, rank in tokenizer.ranks.items()}
        order = np.argsort(-counts, kind="stable")[:top]
        facts["frequent"] = [{"id": int(i), "count": int(counts[i]), "text": readable(spelled.get(int(i), b""))}
                             for i in order if counts[i]]
    return facts


def tokenizer_section(facts: dict[str, Any]) -> str:
    """The HTML of a tokenizer's report."""
    identity = facts["vocabulary"]
    parts = [f'<h2>Identity</h2><p>vocabulary <code data-testid="vocabulary-sha256">{escape(identity["sha256"])}</code>, '
             f'<b data-testid="n_vocab">{identity["n_vocab"]:,}</b> ids</p>']
    graded = facts["grade"]
    if graded is not None:
        domains = [d["domain"] for d in graded["domains"]]
        series = {"this tokenizer": [d["chars_per_token"] for d in graded["domains"]]}
        for baseline in facts["baselines"]:
            by_domain = {d["domain"]: d["chars_per_token"] for d in baseline["domains"]}
            series[Path(baseline["tokenizer"]).name] = [by_domain.get(d, 0.0) for d in domains]
        held = graded["passed"] is not None  # targets given (or the Polish recipe's): a verdict
        lines = {f"target {where} ({graded[key]:g})": graded[key]
                 for key, where in (("min_domain", "per domain"), ("min_global", "overall")) if held and graded[key] is not None}
        plot = bars(domains, series, title="Characters per token by domain (higher is better)", ylabel="characters per token",
                    lines=lines,
                    highlight=graded["weakest_domain"], test_id="domain-chart")
        rows = [[f'<span data-testid="domain-name">{escape(d["domain"])}</span>'
                 + (' <span class="bad">(weakest)</span>' if d["domain"] == graded["weakest_domain"] else ""),
                 f"{d['documents']:,}", f"{d['characters']:,}", f"{d['tokens']:,}",
                 f'<span data-testid="domain-cpt">{d["chars_per_token"]:.3f}</span>']
                + ([('<span class="ok">pass</span>' if d["passed"] else '<span class="bad">fail</span>')] if held else [])
                for d in graded["domains"]]
        verdict = ""
        if held:
            said = " and ".join(f"{value:.2f} {where}" for value, where in ((graded["min_global"], "overall"),
                                                                             (graded["min_domain"], "per domain"))
                                if value is not None)
            outcome = '<span class="ok">passes</span>' if graded["passed"] else '<span class="bad">fails</span>'
            verdict = f'; against {escape(graded["whose"])}, <span data-testid="targets">{said}</span>: {outcome}'
        baseline_rows = [[escape(Path(b["tokenizer"]).name), f"{b['vocab_size']:,}", f"{b['chars_per_token']:.3f}",
                          escape(b["weakest_domain"])] for b in facts["baselines"]]
        parts.append(
            f'<h2>Compression</h2><p>Globally <b data-testid="global-cpt">{graded["chars_per_token"]:.3f}</b> characters '
            f'per token (sums of characters over sums of tokens) on {graded["documents"]:,} documents; weakest domain '
            f'<b data-testid="weakest-domain">{escape(graded["weakest_domain"])}</b>{verdict}.</p>{plot}'
            + table(["domain", "documents", "characters", "tokens", "chars/token"] + ([""] if held else []), rows,
                    numeric=(1, 2, 3, 4), test_id="domain-table")
            + (("<h3>Baselines</h3>" + table(["baseline", "ids", "chars/token", "weakest domain"], baseline_rows,
                                               numeric=(1, 2))) if baseline_rows else "")
        )
    longest = [[f"{t['id']:,}", f"{t['bytes']}", f'<code data-testid="longest-token">{escape(t["text"])}</code>']
               for t in facts["longest"]]
    parts.append("<h2>Longest tokens</h2>" + table(["id", "bytes", "token"], longest, numeric=(0, 1)))
    if facts["frequent"]:
        frequent = [[f"{t['id']:,}", f"{t['count']:,}", f'<code>{escape(t["text"])}</code>'] for t in facts["frequent"]]
        parts.append("<h2>Most frequent tokens on the data</h2>" + table(["id", "count", "token"], frequent, numeric=(0, 1)))
    parts.append('<p class="muted">Tokens are shown as UTF-8 where they decode; ␣ is a space, ⏎ a newline, → a tab, '
                 'and \\xNN a byte that is not a whole character.</p>')
    return "".join(parts)


def tokenizer_report(path: Path, *, data: Path | None = None, baselines: Sequence[Path] = (),
                     min_global: float | None = None, min_domain: float | None = None) -> str:
    """A self-contained HTML report of the tokenizer at ``path`` (graded on ``data`` if given).

    The grade is held to targets only when there are some: ``min_global`` and ``min_domain``
    (characters per token, overall and in every domain) when given, else the Polish recipe's for a
    tokenizer it made (:func:`recipe_targets`); the report says whose they are."""
    targets = (Targets(min_global, min_domain, "your targets") if min_global is not None or min_domain is not None
               else recipe_targets(Path(path)))
    facts = tokenizer_facts(Path(path), data=data, baselines=baselines, targets=targets)
    return page(f"tokpack report: {Path(path).name}", tokenizer_section(facts), data={"tokenizer": facts})
