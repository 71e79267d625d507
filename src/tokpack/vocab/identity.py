"""Vocabulary identity: the record that ties every id in tokpack to the table that made it.

An identity is ``{schema, scheme, sha256, n_vocab}``. ``sha256`` hashes a canonical
serialization of everything that changes ids (for byte-level BPE: the ranks, the pre-tokenizer
pattern and the special tokens), so two vocabularies that encode any text differently never
share one. Packs, batch schedules and checkpoints carry the record; :func:`require_vocabulary`
compares one against a tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import Field, ValidationError

from tokpack._schema import Record, first_problem
from tokpack.errors import InputError, VocabularyMismatch

VOCAB_SCHEMA = "tokpack.vocab.v1"


class VocabIdentity(Record):
    """Which vocabulary made a set of ids.

    >>> identity = VocabIdentity(scheme="uci", sha256="ab" * 32, n_vocab=2000)
    >>> identity.short
    'abababababababab'
    """

    schema_: Literal["tokpack.vocab.v1"] = Field(default="tokpack.vocab.v1", alias="schema")
    scheme: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    n_vocab: int = Field(ge=1)

    @property
    def short(self) -> str:
        """The first 16 hex digits of the hash: enough to name a cache directory."""
        return self.sha256[:16]


class HasIdentity(Protocol):
    """Anything that can say which vocabulary it is (every tokpack encoder)."""

    @property
    def identity(self) -> VocabIdentity: ...


def identity_of(model: Any) -> VocabIdentity:
    """Find the vocabulary identity a model, checkpoint, schedule or pack meta carries.

    Accepted: an object with an ``identity`` (an encoder), ``vocabulary`` or ``data_schedule``
    attribute; a mapping with a ``vocabulary`` entry (a data schedule or a pack's meta), a
    ``data_schedule`` or ``loader`` entry (a checkpoint holding a data schedule or a
    :meth:`tokpack.serve.PackedBatches.state_dict`), or the identity fields themselves.

    Raises:
        InputError: nothing in ``model`` records a vocabulary identity.
    """
    return _identity_of(model, depth=0)


def _identity_of(model: Any, *, depth: int) -> VocabIdentity:
    if isinstance(model, VocabIdentity):
        return model
    if depth > 4:  # a record nests its identity two levels deep at most; deeper is a cycle
        raise InputError(f"no vocabulary identity within {depth} levels", where=type(model).__name__)
    if isinstance(model, Mapping):
        if "sha256" in model and "n_vocab" in model:
            try:
                return VocabIdentity.model_validate(dict(model))
            except ValidationError as error:
                raise InputError(f"vocabulary identity: {first_problem(error)}") from None
        for key in ("vocabulary", "data_schedule", "loader"):  # a checkpoint's loader state carries it too
            if key in model and model[key] is not None:
                return _identity_of(model[key], depth=depth + 1)
        keys = ", ".join(sorted(str(key) for key in model)[:4]) + (", …" if len(model) > 4 else "")
        raise InputError(f"a mapping with keys ({keys}) records no vocabulary identity",
                         fix="pass the checkpoint's 'data_schedule' (TokenBatches.data_schedule()), not the bare "
                             "state_dict")
    for attribute in ("identity", "vocabulary", "data_schedule"):
        value = getattr(model, attribute, None)
        if callable(value) and attribute == "data_schedule":
            value = value()
        if value is not None and not callable(value):
            return _identity_of(value, depth=depth + 1)
    raise InputError(f"{type(model).__name__} carries no vocabulary identity",
                     fix="pass a tokpack encoder, a data schedule, a checkpoint holding one, or a pack's meta")


def encoder_identity(tokenizer: Any) -> VocabIdentity:
    """The identity of a tokpack encoder, or a one-line error for anything else.

    Raises:
        InputError: ``tokenizer`` is not a tokpack encoder (a ``tokenizers.Tokenizer``, a
            ``transformers`` tokenizer, a ``state_dict``), with how to load one.
    """
    identity = getattr(tokenizer, "identity", None)
    if isinstance(identity, VocabIdentity):
        return identity
    raise InputError(f"a {type(tokenizer).__name__} is not a tokpack encoder (it has no vocabulary identity)",
                     fix="load the vocabulary with tokpack.load_vocabulary(path), e.g. the tokenizer.json that "
                         "tokenizer.save(...) or save_pretrained(...) writes")


def require_vocabulary(model: Any, tokenizer: HasIdentity) -> HasIdentity:
    """Check that ``tokenizer`` is the vocabulary ``model`` was trained on, and return it.

    Args:
        model: a trainer-like object, a checkpoint dict, a data schedule or a pack's meta.
        tokenizer: any encoder with an ``identity``.

    Raises:
        InputError: ``model`` records no identity.
        VocabularyMismatch: its hash or ``n_vocab`` differs (both are ``ValueError``).
    """
    expected = identity_of(model)
    actual = encoder_identity(tokenizer)
    if (expected.sha256, expected.n_vocab) != (actual.sha256, actual.n_vocab):
        raise VocabularyMismatch(
            f"tokenizer {actual.scheme}:{actual.short} (n_vocab {actual.n_vocab}) is not the "
            f"vocabulary the model was trained on, {expected.scheme}:{expected.short} "
            f"(n_vocab {expected.n_vocab})"
        )
    return tokenizer
