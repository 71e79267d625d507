"""The report of a pack or sharded dataset: its identity card and its document lengths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tokpack.report.page import escape, page, table
from tokpack.report.plots import histogram, spans_decades
from tokpack.store import TokenSource, open_tokens


def document_lengths(source: TokenSource) -> np.ndarray:
    """Every document's length in ids (``int64``)."""
    return np.diff(np.append(source.starts, source.n_tokens)) if source.n_docs else np.zeros(0, np.int64)


def pack_facts(source: TokenSource, lengths: np.ndarray, *, block: int) -> dict[str, Any]:
    """What the report shows, as plain data (embedded in the page and checked by its tests).

    ``padding_one_per_row`` is the share of target positions that would be padding with one
    document a row (each cut or padded to ``block``); ``padding_packed`` the share with windows
    packed across documents (only each window's last target, and the end of the stream).
    """
    verified, problem = True, None
    try:
        source.verify()
    except ValueError as error:
        verified, problem = False, str(error)
    meta = source.meta
    within = float(np.mean(lengths <= block)) if len(lengths) else 0.0
    real_per_row = np.minimum(lengths, block) - 1  # the last id of a row has no target inside it
    one_per_row = 1.0 - float(np.clip(real_per_row, 0, None).sum()) / (len(lengths) * block) if len(lengths) else 0.0
    windows = len(lengths)
    tail = max(0, int(source.starts[-1]) + block - source.n_tokens) if windows else 0  # the last window runs off the end
    packed = (windows + tail) / (windows * block) if windows else 0.0
    source_record = getattr(meta, "source", None)  # a datatrove folder has none
    counts = getattr(meta, "counts", {})
    characters, games = counts.get("characters"), counts.get("n_games")
    # Bytes per token only where the source's bytes are the text encoded: a text file or folder
    # (cut by lines); a JSON Lines or Parquet file (named FILE#field) holds more than its text,
    # and a chess pack's source is a Parquet table of games.
    cut = getattr(meta, "cut", None)
    text_bytes = source_record.n_bytes if (source_record is not None and cut is not None and cut.rule == "newline"
                                           and "#" not in source_record.name) else None
    shards = getattr(meta, "shards", None)
    return {
        "source": source_record.model_dump(mode="json") if source_record is not None else None,
        "characters_per_token": characters / source.n_tokens if characters and source.n_tokens else None,
        "bytes_per_token": text_bytes / source.n_tokens if text_bytes and source.n_tokens else None,
        "tokens_per_game": source.n_tokens / games if games else None,
        "length_axis": "log" if spans_decades(lengths) else "linear",
        "path": str(source.path),
        "kind": "dataset" if shards is not None else "pack",
        "shards": None if shards is None else len(shards),
        "vocabulary": meta.vocabulary.model_dump(mode="json", by_alias=True),
        "n_docs": int(source.n_docs),
        "n_tokens": int(source.n_tokens),
        "dtype": meta.dtype,
        "tokens_sha256": meta.tokens_sha256,
        "starts_sha256": meta.starts_sha256,
        "verified": verified,
        "problem": problem,
        "ranges": {name: {"documents": list(span.documents), "tokens": list(span.tokens)} for name, span in meta.ranges.items()},
        "lengths": {
            "min": int(lengths.min()) if len(lengths) else 0,
            "p50": float(np.percentile(lengths, 50)) if len(lengths) else 0.0,
            "p95": float(np.percentile(lengths, 95)) if len(lengths) else 0.0,
            "max": int(lengths.max()) if len(lengths) else 0,
            "mean": float(lengths.mean()) if len(lengths) else 0.0,
        },
        "block": block,
        "share_within_block": within,
        "padding_one_per_row": one_per_row,
        "padding_packed": packed,
    }


def pack_section(facts: dict[str, Any], lengths: np.ndarray) -> str:
    """The HTML of a pack's identity card and length histogram."""
    identity = facts["vocabulary"]
    status = ('<span class="ok" data-testid="verified">verified</span>' if facts["verified"]
              else f'<span class="bad" data-testid="verified">NOT verified: {escape(facts["problem"])}</span>')
    sharded = facts["shards"] is not None
    cards = "".join(
        f'<div class="card"><span class="muted">{escape(label)}</span><b data-testid="{key}">{escape(value)}</b></div>'
        for label, key, value in (
            *((("sharded dataset", "shards", f"{facts['shards']:,} shards"),) if sharded else ()),
            ("documents", "n_docs", f"{facts['n_docs']:,}"),
            ("tokens", "n_tokens", f"{facts['n_tokens']:,}"),
            ("dtype", "dtype", facts["dtype"]),
            ("vocabulary size", "n_vocab", f"{identity['n_vocab']:,}"),
        )
    )
    origin = facts["source"]
    compression = " · ".join(
        text for text in (
            f'<span data-testid="characters-per-token">{facts["characters_per_token"]:.2f}</span> characters per token'
            if facts["characters_per_token"] else "",
            f'<span data-testid="bytes-per-token">{facts["bytes_per_token"]:.2f}</span> bytes per token'
            if facts["bytes_per_token"] else "",
            f'<span data-testid="tokens-per-game">{facts["tokens_per_game"]:.1f}</span> tokens per game'
            if facts["tokens_per_game"] else "",
        ) if text
    )
    # A dataset's checksums are of its one stream (all shards in order), as `tokpack merge`'s
    # tokens.npy and starts.npy would have them: there is no such file in the dataset itself.
    stream = (f"all {facts['shards']:,} shards as one stream (the files `tokpack merge` writes)" if sharded else None)
    card_rows = ([["source", f'<span data-testid="source-name">{escape(origin["name"])}</span>, {origin["n_bytes"]:,} bytes, '
                             f'SHA-256 <code>{escape(origin["sha256"])}</code>']] if origin else []) + ([
        ["compression", compression]] if compression else []) + [
        ["vocabulary", f'<code data-testid="vocabulary-sha256">{escape(identity["sha256"])}</code> ({escape(identity["scheme"])})'],
        [f"ids SHA-256, {stream}" if stream else "tokens.npy SHA-256", f"<code>{escape(facts['tokens_sha256'])}</code>"],
        [f"starts SHA-256, {stream}" if stream else "starts.npy SHA-256", f"<code>{escape(facts['starts_sha256'])}</code>"],
        ["checksums", status],
    ] + [[f"range {escape(name)}", f"documents {span['documents'][0]:,}–{span['documents'][1]:,}, "
                                   f"tokens {span['tokens'][0]:,}–{span['tokens'][1]:,}"]
         for name, span in facts["ranges"].items()]
    stats = facts["lengths"]
    plot = histogram(lengths, title="Document length", xlabel="tokens per document",
                     marks={"p50": stats["p50"], "p95": stats["p95"], "block": facts["block"]}, test_id="length-histogram")
    padding = table(
        ["layout", "padding share of targets"],
        [["one document per row", f'<span data-testid="padding-one-per-row">{facts["padding_one_per_row"]:.2%}</span>'],
         ["packed windows (tokpack)", f'<span data-testid="padding-packed">{facts["padding_packed"]:.2%}</span>']],
        numeric=(1,),
    )
    return (
        f'<h2>Identity card</h2><div class="cards">{cards}</div>{table(["", ""], card_rows)}'
        f'<h2>Document lengths</h2>{plot}'
        f'<p>p50 <b data-testid="p50">{stats["p50"]:,.0f}</b> tokens, p95 <b data-testid="p95">{stats["p95"]:,.0f}</b>, '
        f'longest {stats["max"]:,}; <b data-testid="share-within-block">{facts["share_within_block"]:.1%}</b> of documents '
        f'fit in a block of {facts["block"]:,}.</p>{padding}'
    )


def pack_report(path: str | Path, *, block: int = 1024) -> str:
    """A self-contained HTML report of the pack or sharded dataset at ``path``.

    Raises:
        InputError: ``path`` cannot be opened (a failed checksum is shown, not raised).
    """
    source = open_tokens(Path(path), verify=False)  # verified below, so a failure is reported, not raised
    lengths = document_lengths(source)
    facts = pack_facts(source, lengths, block=block)
    # The corpus's own name is the title: a folder is often just a cache key.
    name = facts["source"]["name"] if facts["source"] else Path(path).name
    kind = f" (sharded dataset, {facts['shards']:,} shards)" if facts["shards"] is not None else ""
    return page(f"{name}{kind}: tokpack report", pack_section(facts, lengths), data={"pack": facts})
