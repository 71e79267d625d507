"""HTML reports: one self-contained page per pack, dataset, tokenizer or chess statistics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokpack.errors import InputError


def report_for(target: Path, *, block: int = 1024, data: Path | None = None, baselines: Sequence[Path] = (),
               min_global: float | None = None, min_domain: float | None = None) -> str:
    """The report page for ``target``, chosen by what it is (a tokenizer's grade is held to
    ``min_global``/``min_domain`` when given: see :func:`tokpack.report.tokenizer.tokenizer_report`).

    Raises:
        InputError / IntegrityError: a target of no known kind, or one that cannot be opened.
    """
    target = Path(target)
    if target.is_dir():
        from tokpack.report.pack import pack_report

        return pack_report(target, block=block)
    if target.suffix == ".json" and b'"tokpack.chess.stats.v1"' in target.read_bytes()[:200_000]:
        from tokpack.report.chess import chess_report

        return chess_report(target)
    if target.suffix in (".json", ".tiktoken") and _is_tokenizer(target):
        from tokpack.report.tokenizer import tokenizer_report

        return tokenizer_report(target, data=data, baselines=baselines, min_global=min_global, min_domain=min_domain)
    raise InputError("not a pack or dataset folder, nor a tokenizer (chess reports: tokpack.report.chess.chess_report)", where=target)


__all__ = ["report_for"]


def _is_tokenizer(path: Path) -> bool:
    if path.suffix == ".tiktoken":
        return True
    head = path.read_bytes()[:4096]
    return b'"model"' in head or b'"tokpack.vocabulary.v1"' in head or b'"added_tokens"' in head
