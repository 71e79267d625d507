"""Train a byte-level BPE vocabulary with Hugging Face ``tokenizers``' trainer."""

from __future__ import annotations

from collections.abc import Iterable

from tokpack import _checks as checks
from tokpack.errors import InputError
from tokpack.vocab.bytelevel import BpeTokenizer
from tokpack.vocab.merge_files import unicode_to_bytes
from tokpack.vocab.patterns import DEFAULT_PATTERN, covering, resolve_pattern
from tokpack.vocab.trainers import TRAINED_SPECIAL_TOKENS, without_spellings


def train_hf_bytelevel(
    texts: Iterable[str], *, vocab_size: int, min_frequency: int = 2, pattern: str = DEFAULT_PATTERN
) -> BpeTokenizer:
    """Train ``vocab_size`` ranks (the 256 bytes included; ``<|endoftext|>`` follows them, so
    ``n_vocab`` is at most ``vocab_size + 1``) on ``texts``, pre-tokenized by ``pattern``: a name
    (``gpt4``, ``gpt2``, ``polish``, ``polish-phrase``) or a regex that matches every character.

    The trainer pre-tokenizes with ``pattern`` exactly as the encoder will, and every byte is in
    the alphabet, so any UTF-8 text encodes. It may stop short of ``vocab_size`` when no pair
    reaches ``min_frequency``; the result's ``n_vocab`` says how many ids there are. The texts'
    spellings of ``<|endoftext|>`` are cut out first (Hugging Face's trainer would learn them as
    text, even when told they are special), as :func:`tokpack.bpe.train_bytelevel` cuts them.

    Raises:
        InputError: ``vocab_size`` below 256, ``min_frequency`` below 1, or a pattern that does
            not compile or skips text.
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    if vocab_size < 256:
        raise InputError(f"vocab_size must be at least 256 (one rank per byte), got {vocab_size}")
    checks.positive_int("min_frequency", min_frequency, what="at least 1")
    pattern = resolve_pattern(pattern, "pattern")
    texts = without_spellings(covering(texts, pattern, "pattern"), TRAINED_SPECIAL_TOKENS)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    vocab = tokenizer.get_vocab()
    ranks = {unicode_to_bytes(token, where="trained vocabulary"): rank for token, rank in vocab.items()}
    return BpeTokenizer(ranks=ranks, pattern=pattern)
