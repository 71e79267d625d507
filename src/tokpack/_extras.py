"""The optional extras: which ``pip install 'tokpack[...]'`` brings a missing module."""

from __future__ import annotations

from tokpack.errors import MissingExtra

#: Top-level module -> (extra that installs it, what needs it). The core (``pip install tokpack``)
#: is vocabularies, the store, corpora, serving, the engines and the CLI.
EXTRAS: dict[str, tuple[str, str]] = {
    "chess": ("chess", "chess games (python-chess)"),
    "matplotlib": ("report", "reports (matplotlib)"),
    "sentencepiece": ("grading", "sentencepiece baselines and models"),
    "ray": ("ray", "the Ray engine"),
    "torch": ("torch", "the PyTorch loaders"),
    "transformers": ("torch", "transformers"),
}


def missing_extra(error: ImportError) -> MissingExtra | None:
    """The :class:`MissingExtra` naming the extra that provides the module ``error`` lacks, or
    ``None`` when no extra does.

    >>> str(missing_extra(ModuleNotFoundError("No module named 'chess'", name="chess")))
    "chess games (python-chess) need the chess extra: pip install 'tokpack[chess]'"
    """
    if isinstance(error, MissingExtra):
        return error
    root = (getattr(error, "name", None) or "").split(".")[0]
    if root not in EXTRAS:
        return None
    extra, what = EXTRAS[root]
    return MissingExtra(f"{what} need the {extra} extra: pip install 'tokpack[{extra}]'")
