"""The names of the vocabulary trainers (``prepare(trainer=...)``, ``--trainer``, a training
recipe): ``exact``, tokpack's own (:mod:`tokpack.bpe`), and ``hf``, Hugging Face ``tokenizers``;
and the cut every trainer makes in its text at the special tokens' spellings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

from tokpack.vocab.patterns import END_OF_TEXT

Trainer = Literal["hf", "exact"]

#: The special tokens a trained vocabulary holds (numbered after its ranks). Their spellings are
#: cut out of the text it is trained on: a merge that made one would give its spelling a second id,
#: which a ``tokenizer.json`` cannot hold (Hugging Face's trainer counts them as text even when it
#: is told they are special).
TRAINED_SPECIAL_TOKENS: tuple[str, ...] = (END_OF_TEXT,)


def special_cut(spellings: Sequence[str]) -> Callable[[str], list[str]] | None:
    """How a text is cut at ``spellings`` (the spellings taken out): ``str.split`` for one (a
    text without it is handed back as the same object), a regex of them in order for more;
    ``None`` for none.

    >>> special_cut(["<|x|>"])("a<|x|>b<|x|>")
    ['a', 'b', '']
    >>> special_cut(["<|x|>", "<|y|>"])("a<|y|>b<|x|>c")
    ['a', 'b', 'c']
    """
    if not spellings:
        return None
    if len(spellings) == 1:
        (spelling,) = spellings
        return lambda text: text.split(spelling)
    import regex

    return regex.compile("|".join(map(regex.escape, spellings))).split


def without_spellings(texts: Iterable[str], spellings: Sequence[str] = TRAINED_SPECIAL_TOKENS) -> Iterator[str]:
    """The parts of each of ``texts`` between the special tokens' ``spellings``, the text a
    vocabulary is trained on: no piece of the pre-tokenizer spans a cut or holds a spelling, so no
    merge can make one. Anything but a ``str`` is handed on as it is (for the trainer to refuse).

    >>> list(without_spellings(["a<|endoftext|>b", "c"]))
    ['a', 'b', 'c']
    """
    cut = special_cut(spellings)
    for text in texts:
        if cut is None or not isinstance(text, str):
            yield text
        else:
            yield from cut(text)
