"""Train a byte-level BPE tokenizer of an exact size and write it for both libraries.

The recipe (:class:`TrainingRecipe`) names everything that changes the result: vocabulary
size, trainer, pre-tokenizer pattern, per-domain weights, minimum pair frequency and the
optional second stage of *phrase merges*. :func:`train_tokenizer` returns a
:class:`~tokpack.vocab.BpeTokenizer` with exactly ``vocab_size`` ids, ``<|endoftext|>`` being
the last; :func:`write_tokenizer` writes it as a Hugging Face ``tokenizer.json`` and, beside
it, a tiktoken rank file (``ranks.tiktoken``) plus tokpack's ``vocabulary.json`` (pattern and
special tokens), all giving the same ids.

Phrase merges (after SuperBPE): the first stage learns ordinary merges inside words; the second
stage continues from that vocabulary with a coarser pattern whose pieces may span several words
joined by single spaces, so frequent phrases (`` nie jest``, `` w tym``) become one token. The
second stage runs Hugging Face's trainer on first-stage token sequences, each token spelled as
one private-use character, and maps the merges back to bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import Field

from tokpack._schema import Record
from tokpack.errors import InputError
from tokpack.grading.files import corpus_files, read_document
from tokpack.vocab import BpeTokenizer, train_hf_bytelevel
from tokpack.vocab.bytelevel import RANKS_FILE
from tokpack.vocab.patterns import DEFAULT_PATTERN, END_OF_TEXT, POLISH_PATTERN, POLISH_PHRASE_PATTERN
from tokpack.vocab.trainers import TRAINED_SPECIAL_TOKENS, Trainer, without_spellings

#: First private-use code point of plane 15: stage-two sequences spell token ``i`` as ``chr(_PUA + i)``.
_PUA = 0xF0000


class TrainingRecipe(Record):
    """Everything that decides what :func:`train_tokenizer` learns."""

    vocab_size: int = Field(ge=258, description="ids in the result, <|endoftext|> included")
    trainer: Trainer = "exact"  # the default of every trainer option (prepare's too)
    pattern: str = DEFAULT_PATTERN  # every trainer's default; the Polish artifact names POLISH_PATTERN
    min_frequency: int = Field(default=2, ge=1)
    domain_weights: dict[str, float] = Field(default_factory=dict)
    phrase_merges: int = Field(default=0, ge=0, description="ids learned by the phrase stage")
    phrase_pattern: str = POLISH_PHRASE_PATTERN


def parse_domain_weights(spec: str) -> dict[str, float]:
    """Parse ``domain=weight,domain=weight``; domains not named keep weight 1.

    >>> parse_domain_weights("narrative=2, technical=0.5")
    {'narrative': 2.0, 'technical': 0.5}

    Raises:
        InputError: a malformed entry or a negative weight.
    """
    weights: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = entry.partition("=")
        try:
            weight = float(value)
        except ValueError:
            raise InputError(f"domain weight {entry!r}: expected domain=number") from None
        if not name.strip() or weight < 0:
            raise InputError(f"domain weight {entry!r}: expected a domain and a weight >= 0")
        weights[name.strip()] = weight
    return weights


def weighted_documents(
    train_dirs: Sequence[Path], domain_weights: dict[str, float]
) -> tuple[list[str], list[tuple[Path, str]]]:
    """The training texts of ``train_dirs`` with each domain's documents repeated by its weight.

    Domains are the first-level subfolders of every folder (two folders may share one). A weight
    ``w`` gives each document ``floor(w)`` copies plus one more for an evenly spread
    ``w - floor(w)`` share of the domain's documents (so 0.5 keeps every other document).
    Returns the texts and the distinct files used with their domains.

    Raises:
        InputError: no usable file, a weight for a domain no folder has, or an unreadable file.
    """
    groups: dict[str, list[Path]] = {}
    for train_dir in train_dirs:
        for domain, paths in corpus_files(Path(train_dir)).by_domain().items():
            groups.setdefault(domain, []).extend(paths)
    unknown = sorted(set(domain_weights) - set(groups))
    if unknown:
        raise InputError(f"no domain {unknown[0]!r} in the training folders (domains: {', '.join(sorted(groups))})")
    texts: list[str] = []
    used: list[tuple[Path, str]] = []
    for domain, paths in sorted(groups.items()):
        weight = domain_weights.get(domain, 1.0)
        whole, fraction = int(weight), weight - int(weight)
        for index, path in enumerate(paths):
            # Document i gets the extra copy when the running share of the fraction ticks over.
            copies = whole + (int((index + 1) * fraction) - int(index * fraction))
            if copies:
                text = read_document(path)
                texts.extend([text] * copies)
                used.append((path, domain))
    if not texts:
        raise InputError("no usable text file in the training folders (after domain weights)")
    return texts, used


def train_tokenizer(texts: Sequence[str], recipe: TrainingRecipe, *, allow_smaller: bool = False) -> BpeTokenizer:
    """Learn ``recipe.vocab_size - 1`` ranks (all 256 bytes included) plus ``<|endoftext|>``.

    Args:
        allow_smaller: accept fewer ids when the data cannot reach the size (``<|endoftext|>``
            then follows the ranks learned), as ``prepare(allow_smaller_vocab=True)`` does.

    Raises:
        InputError: the data cannot reach the size (too little or too uniform text) and
            ``allow_smaller`` is false, or a phrase stage larger than the vocabulary.
    """
    if recipe.phrase_merges and recipe.phrase_pattern == POLISH_PHRASE_PATTERN and recipe.pattern != POLISH_PATTERN:
        # Its pieces are the Polish pattern's joined by spaces; over another pattern's, a phrase
        # token could not be built from the word ranks.
        raise InputError("phrase_pattern='polish-phrase' extends pattern='polish', not the one given",
                         fix="pass pattern='polish', or a phrase_pattern of your own")
    ranks_wanted = recipe.vocab_size - 1
    # Both stages learn from the text between <|endoftext|>'s spellings: no token may spell it.
    texts = list(without_spellings(texts, TRAINED_SPECIAL_TOKENS))
    word_ranks = ranks_wanted - recipe.phrase_merges
    if word_ranks < 256:
        raise InputError(f"phrase_merges {recipe.phrase_merges} leaves fewer than 256 ids for bytes")
    base = _train_words(texts, recipe, word_ranks)
    if len(base.ranks) < word_ranks and not (allow_smaller and not recipe.phrase_merges):
        reached = len(base.ranks) + 1 + recipe.phrase_merges
        raise InputError(
            f"the data reaches only {reached:,} ids of the {recipe.vocab_size:,} asked for (too few pairs "
            f"occur min_frequency={recipe.min_frequency} times)",
            fix=f"pass vocab_size={reached} or less, add text"
            + (", or fewer phrase_merges" if recipe.phrase_merges else ", or accept fewer with allow_smaller=True"))
    ranks = dict(base.ranks)
    pattern = recipe.pattern
    if recipe.phrase_merges:
        ranks.update(_phrase_merges(texts, base, recipe))
        pattern = recipe.phrase_pattern
    if len(ranks) < ranks_wanted and not recipe.phrase_merges:  # allow_smaller: fewer word ranks
        return BpeTokenizer(ranks=ranks, pattern=pattern, special_tokens={END_OF_TEXT: len(ranks)})
    if len(ranks) < ranks_wanted:
        raise InputError(
            f"the phrase stage found only {len(ranks) - word_ranks} of {recipe.phrase_merges} merges: "
            "add text or lower phrase_merges"
        )
    return BpeTokenizer(ranks=ranks, pattern=pattern, special_tokens={END_OF_TEXT: ranks_wanted})


def _train_words(texts: Sequence[str], recipe: TrainingRecipe, size: int) -> BpeTokenizer:
    if recipe.trainer == "hf":
        return train_hf_bytelevel(texts, vocab_size=size, min_frequency=recipe.min_frequency, pattern=recipe.pattern)
    from tokpack.bpe import train_bytelevel  # the exact trainer: loaded by the training that uses it

    return train_bytelevel(texts, vocab_size=size, min_frequency=recipe.min_frequency, pattern=recipe.pattern)


def _phrase_merges(texts: Sequence[str], base: BpeTokenizer, recipe: TrainingRecipe) -> dict[bytes, int]:
    """The second stage: ``recipe.phrase_merges`` new tokens, ranked after ``base``'s."""
    import regex
    from tokenizers import Tokenizer, models, trainers

    pieces = Counter(match.group() for text in texts for match in regex.finditer(recipe.phrase_pattern, text))
    unique = list(pieces)
    word_encoder = BpeTokenizer(ranks=base.ranks, pattern=recipe.pattern, special_tokens={})
    sequences: dict[str, int] = {}
    for piece, ids in zip(unique, word_encoder.encode_batch(unique)):
        if len(ids) >= 2:
            spelled = "".join(chr(_PUA + i) for i in ids)
            sequences[spelled] = sequences.get(spelled, 0) + pieces[piece]
    alphabet = {char for spelled in sequences for char in spelled}
    margin = recipe.phrase_merges // 2 + 64  # merges that rebuild an existing token are skipped
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + recipe.phrase_merges + margin,
        min_frequency=recipe.min_frequency,
        show_progress=False,
    )
    stage = Tokenizer(models.BPE())
    stage.train_from_iterator(_repeat(sequences), trainer=trainer)
    token_bytes = {rank: token for token, rank in base.ranks.items()}
    added: dict[bytes, int] = {}
    next_rank = len(base.ranks)
    for merge in json.loads(stage.to_str())["model"]["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ")
        token = b"".join(token_bytes[ord(char) - _PUA] for char in left + right)
        if token in base.ranks or token in added:
            continue
        added[token] = next_rank
        next_rank += 1
        if len(added) == recipe.phrase_merges:
            break
    return added


def _repeat(counts: dict[str, int]) -> Iterator[str]:
    for text, count in counts.items():
        for _ in range(count):
            yield text


def write_tokenizer(tokenizer: BpeTokenizer, out_json: Path, *, trained_on: dict[str, str | int] | None = None) -> list[Path]:
    """Write ``out_json`` (Hugging Face) and, in its folder, ``ranks.tiktoken``, ``vocabulary.json``,
    and the ``tokenizer_config.json`` and ``special_tokens_map.json`` that let
    ``transformers.AutoTokenizer.from_pretrained(folder)`` load it with its eos and pad tokens.

    Each file is written to a temporary sibling and renamed into place. Returns the paths.
    """
    out_json = Path(out_json)
    folder = out_json.parent
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=folder))
    try:
        (staging / out_json.name).write_text(tokenizer.to_tokenizer_json(), encoding="utf-8")
        tokenizer.write_files(staging, trained_on=trained_on)
        extra = tokenizer.transformers_files()
        for name, text in extra.items():
            (staging / name).write_text(text, encoding="utf-8")
        written = []
        for name in (RANKS_FILE, "vocabulary.json", out_json.name, *extra):
            os.replace(staging / name, folder / name)
            written.append(folder / name)
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    return written

