"""Byte-level BPE vocabularies and their encoder.

A :class:`BpeTokenizer` is ranks (``{token bytes: id}``, all 256 single bytes included), a
pre-tokenizer pattern and special tokens. Corpus text is encoded as tiktoken's *ordinary*
encoding does, so ``<|endoftext|>`` written in the text is neither inserted nor recognized: by
tokpack's compiled encoder (:mod:`tokpack.vocab.compiled`, the same ids) when the pattern has a
compiled pre-tokenizer, by tiktoken otherwise (:attr:`BpeTokenizer.engine` says which).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, ValidationError

from tokpack import _checks as checks
from tokpack._atomic import building, write_atomically
from tokpack._schema import Record, first_problem, read_record, write_record
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity
from tokpack.vocab.merge_files import refuse_spelled_specials, tokenizer_json_bytes
from tokpack.vocab.patterns import END_OF_TEXT, GPT2_PATTERN, check_covers, resolve_pattern
from tokpack.vocab.published import published_last_joins
from tokpack.vocab.rank_files import Ranks, TokenTable, parse_rank_table, rank_file_lines

if TYPE_CHECKING:
    import tiktoken

    from tokpack.vocab.compiled import CompiledBpe

SCHEME = "bytelevel-bpe"
RANKS_FILE = "ranks.tiktoken"
VOCABULARY_FILE = "vocabulary.json"
#: Hugging Face's file of a vocabulary, which its loaders take from a folder.
TOKENIZER_JSON = "tokenizer.json"
#: Every id is below this: tiktoken stores them as 32-bit integers.
_ID_LIMIT = 1 << 32


class VocabularyRecord(Record):
    """``vocabulary.json``: what a saved vocabulary directory holds besides its rank file.

    ``trained_on`` is what ``prepare`` trained the vocabulary on (the corpus's SHA-256, every
    setting that decides it, the sample it read), kept in the cache's copy only: a rerun checks it
    before reusing the vocabulary, and ``prepare`` reads it back to say what it was trained on.
    ``None`` in a pack's copy, whose files are derived from the vocabulary itself (they are the same
    bytes in every pack of one vocabulary, however it came), and wherever no training is recorded
    (:meth:`BpeTokenizer.save` without it: ``tokpack bpe train``, ``tokpack tokenizer train``)."""

    schema_: Literal["tokpack.vocabulary.v1"] = Field(default="tokpack.vocabulary.v1", alias="schema")
    identity: VocabIdentity
    pattern: str
    special_tokens: dict[str, int]
    ranks_file: str = RANKS_FILE
    ranks_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    trained_on: dict[str, str | int] | None = None


class TextEncoderSpec(Record):
    """The ``spec`` of a text encoder's ``encoder.json`` (see :mod:`tokpack.engines.encoders`):
    the pattern, the special tokens and the rank file's text."""

    pattern: str
    special_tokens: dict[str, int]
    ranks: str


class BpeTokenizer:
    """A byte-level BPE vocabulary and its encoder.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    >>> tokenizer = BpeTokenizer(ranks=ranks)
    >>> tokenizer.encode("abc ab")
    [256, 99, 32, 256]
    >>> tokenizer.decode([256, 99]), tokenizer.n_vocab, tokenizer.eot_id
    ('abc', 258, 257)
    """

    #: how ``encoder.json`` names this kind of encoder (:data:`tokpack.engines.kinds.KINDS`)
    record_kind = "text"

    def __init__(
        self,
        *,
        ranks: Mapping[bytes, int],
        pattern: str = GPT2_PATTERN,
        special_tokens: Mapping[str, int] | None = None,
        source: str | os.PathLike[str] | None = None,
    ) -> None:
        """Build a tokenizer.

        Args:
            ranks: token bytes to id; every single byte must be present (so any UTF-8 encodes).
            pattern: the pre-tokenizer: a name (``gpt2``, ``gpt4``, ``polish``,
                ``polish-phrase``) or a regex; GPT-2's unless given (see ``patterns``).
            special_tokens: name to id; by default ``<|endoftext|>`` takes the id after the
                highest rank. Special tokens are never produced from corpus text.
            source: the file the ranks were read from, if any: errors about the ranks name it
                (here, and when :meth:`to_tokenizer_json` finds a token lower ranks cannot build).

        Raises:
            InputError: a missing single byte, or an id used twice.
        """
        self.ranks: Ranks = dict(ranks)
        self.source = source
        missing = [b for b in range(256) if bytes([b]) not in self.ranks]
        values = list(self.ranks.values())
        self.__dict__["_rank_ids"] = set(values)
        distinct = len(self.__dict__["_rank_ids"]) == len(values) and (not values or min(values) >= 0)
        self._check_ids(missing, distinct, max(values, default=-1), pattern, special_tokens, source)

    def _check_ids(self, missing: list[int], distinct: bool, highest: int, pattern: str,
                   special_tokens: Mapping[str, int] | None, source: str | os.PathLike[str] | None) -> None:
        """Finish the constructor from what its ranks say: the single bytes ``missing``, whether
        their ids are ``distinct`` and non-negative, and the ``highest``; the special tokens (by
        default ``<|endoftext|>`` after the highest rank) are checked against them here.

        Raises:
            InputError: as the constructor.
        """
        if missing:
            raise InputError(f"ranks lack {len(missing)} of the 256 single bytes (first: {missing[0]})", where=source,
                             fix="a byte-level vocabulary needs every single byte as a token"
                                 + (": is this file complete?" if source is not None else ""))
        if special_tokens is None:
            special_tokens = {END_OF_TEXT: highest + 1}
        self.special_tokens: dict[str, int] = dict(special_tokens)
        specials = list(self.special_tokens.values())
        if (not distinct or len(set(specials)) != len(specials) or min(specials, default=0) < 0
                or any(self._is_rank(number) for number in specials)):
            raise InputError("ranks and special tokens must use distinct non-negative ids")
        top = max([highest, *specials])
        if top >= _ID_LIMIT:
            # tiktoken holds ids as 32-bit integers; a rank of 2**32 - 1 leaves no id for <|endoftext|>.
            named = ", ".join(f"{name} is {number:,}" for name, number in self.special_tokens.items()
                              if number >= _ID_LIMIT)
            raise InputError(f"ids must be below 2**32 (the highest rank is {highest:,}"
                             + (f"; {named}" if named else "") + ")", where=source,
                             fix="number the ranks and special tokens from 0 without such gaps")
        self.pattern = resolve_pattern(pattern, "pattern")
        self._highest_rank = highest
        self.n_vocab = top + 1

    def _is_rank(self, number: int) -> bool:
        """Whether ``number`` is the id of one of the ranks' tokens."""
        table = self.__dict__.get("_table")
        if table is None:
            return number in self.__dict__["_rank_ids"]
        return bool(np.any(table.ids == number))

    @classmethod
    def from_table(cls, table: TokenTable, *, pattern: str = GPT2_PATTERN,
                   special_tokens: Mapping[str, int] | None = None,
                   source: str | os.PathLike[str] | None = None) -> BpeTokenizer:
        """The tokenizer of the ranks in ``table`` (no token or id repeated, as a rank file's
        parse gives them): as the constructor checks and builds it, with the dict of
        :attr:`ranks` made only when something asks for it (the compiled encoder is built from
        the table's arrays).

        >>> from tokpack.vocab.rank_files import TokenTable
        >>> table = TokenTable.of({bytes([b]): b for b in range(256)} | {b"ab": 256})
        >>> tokenizer = BpeTokenizer.from_table(table)
        >>> tokenizer.encode("abc"), tokenizer.n_vocab, tokenizer.ranks[b"ab"]
        ([256, 99], 258, 256)

        Raises:
            InputError: as the constructor.
        """
        tokenizer = cls.__new__(cls)
        tokenizer.__dict__["_table"] = table
        tokenizer.source = source
        lengths = table.lengths()
        ones = np.frombuffer(table.joined, np.uint8)[table.ends[lengths == 1] - 1]
        present = np.zeros(256, bool)
        present[ones] = True
        missing = np.flatnonzero(~present).tolist()
        ids = table.ids
        highest = int(ids.max()) if len(ids) else -1
        distinct = not len(ids) or (int(ids.min()) >= 0 and (bool(np.all(ids[1:] > ids[:-1]))
                                                             or len(np.unique(ids)) == len(ids)))
        tokenizer._check_ids(missing, distinct, highest, pattern, special_tokens, source)
        return tokenizer

    @cached_property
    def ranks(self) -> Ranks:
        """Token bytes to id (made from the table when built by :meth:`from_table`)."""
        return self.__dict__["_table"].ranks()

    @classmethod
    def from_rank_text(cls, text: bytes, *, pattern: str = GPT2_PATTERN, special_tokens: Mapping[str, int] | None = None,
                       source: str | os.PathLike[str] | None = None, text_sha256: str | None = None) -> BpeTokenizer:
        """The tokenizer of the ranks in a rank file's ``text`` (see
        :func:`~tokpack.vocab.rank_files.parse_rank_text`; errors name ``source``); when ``text`` is
        already the canonical rank text (tiktoken's published files are), the identity hashes it
        as read instead of writing it out again, and ``text_sha256``, the SHA-256 of ``text`` when
        the caller took it, is taken as :attr:`ranks_sha256` (not hashed again).

        >>> text = rank_file_lines({bytes([b]): b for b in range(256)} | {b"ab": 256})
        >>> tokenizer = BpeTokenizer.from_rank_text(text)
        >>> tokenizer.n_vocab, tokenizer.rank_lines is text
        (258, True)

        Raises:
            InputError: as :func:`~tokpack.vocab.rank_files.parse_rank_lines` and the constructor.
        """
        table, canonical = parse_rank_table(text, where=source if source is not None else "the ranks")
        tokenizer = cls.from_table(table, pattern=pattern, special_tokens=special_tokens, source=source)
        if canonical:
            tokenizer.__dict__["rank_lines"] = text  # what the cached property would compute
            if text_sha256 is not None:
                tokenizer.__dict__["ranks_sha256"] = text_sha256  # the same: its hash
        return tokenizer

    @cached_property
    def _encoding(self) -> tiktoken.Encoding:
        import tiktoken  # the fallback and decoding need it; the compiled encoder does not

        return tiktoken.Encoding(
            name=f"tokpack-{self.identity.short}",
            pat_str=self.pattern,
            mergeable_ranks=self.ranks,
            special_tokens=self.special_tokens,
        )

    @cached_property
    def _compiled(self) -> CompiledBpe | None:
        from tokpack.vocab.compiled import CompiledBpe

        if not self._compilable:
            return None
        table = self.__dict__.get("_table")
        return CompiledBpe(self.ranks if table is None else table, self.pattern)

    @cached_property
    def _compilable(self) -> bool:
        return self.fallback_reason is None

    @property
    def engine(self) -> Literal["compiled", "tiktoken"]:
        """Which encoder gives the ids: tokpack's compiled one, or tiktoken for a pattern that has
        no compiled pre-tokenizer, ids past the compiled encoder's limit, or an installation whose
        C extension was not built (same ids either way; :attr:`fallback_reason` says which)."""
        return "compiled" if self._compilable else "tiktoken"

    @cached_property
    def fallback_reason(self) -> str | None:
        """Why tiktoken encodes this vocabulary, or ``None`` if the compiled encoder does."""
        from tokpack.vocab.compiled import COMPILED_PATTERNS, MAX_ID, MISSING

        if self.pattern not in COMPILED_PATTERNS:
            return "the pattern has no compiled pre-tokenizer"
        if self._highest_rank >= MAX_ID:
            return f"ids of {MAX_ID:,} and more have no compiled encoder"
        return MISSING

    def encoder_report(self) -> dict[str, object]:
        """Which engine encodes, and (compiled) what its bounded piece caches hold and did."""
        if self._compiled is None:
            return {"engine": "tiktoken", "reason": self.fallback_reason}
        return {"engine": "compiled", "piece_cache": dataclasses.asdict(self._compiled.cache_report())}

    @property
    def eot_id(self) -> int | None:
        """The id of ``<|endoftext|>``, if this vocabulary has it."""
        return self.special_tokens.get(END_OF_TEXT)

    def canonical_bytes(self) -> bytes:
        """The serialization the identity hashes: scheme, pattern, special tokens, ranks."""
        return _canonical_header(self.pattern, self.special_tokens) + self.rank_lines

    @cached_property
    def rank_lines(self) -> bytes:
        """The canonical ``ranks.tiktoken`` text, built once: the identity hashes it and
        :meth:`save` writes it (a 50k-rank vocabulary takes a noticeable part of a second)."""
        return rank_file_lines(self.ranks)

    @cached_property
    def ranks_sha256(self) -> str:
        """The SHA-256 of :attr:`rank_lines` (what tiktoken publishes for its rank files)."""
        return hashlib.sha256(self.rank_lines).hexdigest()

    @cached_property
    def identity(self) -> VocabIdentity:
        """``{schema, scheme, sha256, n_vocab}`` of this vocabulary."""
        digest = hashlib.sha256(self.canonical_bytes()).hexdigest()
        return VocabIdentity(scheme=SCHEME, sha256=digest, n_vocab=self.n_vocab)

    def check_covers(self, text: str, where: str | os.PathLike[str] | None = None) -> None:
        """Refuse this vocabulary's pattern if it skips part of ``text`` (its first 64 KiB: a
        document at hand), which would drop those characters from the ids without a word.

        Raises:
            InputError: naming ``where``, the skipped characters and their position.
        """
        check_covers(self.pattern, text[:65536], where)

    def check_spelled(self, texts: Sequence[str | bytes], ids: Sequence[np.ndarray], n_bytes: Sequence[int], *,
                      where: str | os.PathLike[str] | None = None,
                      document_name: Callable[[int], str] = lambda number: f"text {number:,} (counting from 0)",
                      ) -> None:
        """Refuse ids that leave out part of their text: each text's ids must spell all of its
        ``n_bytes`` bytes of UTF-8. A pattern with no compiled pre-tokenizer (which falls back to
        tiktoken) may skip characters anywhere, not only where :meth:`check_covers` looked; the
        compiled pre-tokenizers match every character, so their ids are not checked.

        ``texts``: as :meth:`encode_arrays` took them (``bytes``: UTF-8 it checked).

        Raises:
            InputError: naming ``where``, the document (``document_name`` of its place in
                ``texts``) and the characters skipped.
        """
        if self._compilable:
            return
        token_ids, lengths = self._token_lengths
        for number, (text, one, size) in enumerate(zip(texts, ids, n_bytes)):
            spelled = int(lengths[np.searchsorted(token_ids, one)].sum()) if len(one) else 0
            if spelled != size:
                document = document_name(number)
                check_covers(self.pattern, text if isinstance(text, str) else text.decode("utf-8"), where,
                             document=document)
                raise InputError(f"pre-tokenizer pattern '{_shown(self.pattern)}' leaves {size - spelled:,} of the "
                                 f"{size:,} bytes of {document} out of its ids (tiktoken's regex engine skips the "
                                 "character after an empty match)", where=where,
                                 fix="use a pattern that matches every character and never the empty string, e.g. "
                                     "a named one: gpt4 (the default), gpt2, polish or polish-phrase")

    @cached_property
    def _token_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids in order and the length in bytes of each one's token (special tokens: their
        names'): looked up by search, as ids may run up to 2**32 with gaps."""
        pairs = [(rank, len(token)) for token, rank in self.ranks.items()]
        pairs += [(rank, len(name.encode("utf-8"))) for name, rank in self.special_tokens.items()]
        table = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        return table[:, 0].copy(), table[:, 1].copy()

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; special-token names in it are encoded as ordinary text."""
        if self._compiled is not None:
            return self._compiled.encode([text])[0].tolist()
        with _regex_failures(self.pattern):
            return self._encoding.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """Ids of many texts at once, on ``num_threads`` threads (default: every core)."""
        threads = _threads(num_threads)
        if self._compiled is not None:
            return [ids.tolist() for ids in self.encode_arrays(texts, num_threads=threads)]
        with _regex_failures(self.pattern):
            return self._encoding.encode_ordinary_batch(list(texts), num_threads=threads)

    def encode_arrays(self, texts: Sequence[str | bytes], *, num_threads: int | None = None) -> list[np.ndarray]:
        """Ids of many texts as ``uint32`` arrays, on ``num_threads`` threads (default: every core).

        The fast path for packing: no Python list of ints is ever built, and the encoder releases
        the GIL while it encodes, so threads run in parallel. A lone surrogate is encoded as
        tiktoken's ``encode_ordinary`` does (see :mod:`tokpack.vocab.compiled`). A ``bytes`` text
        is UTF-8, encoded as the ``str`` it decodes to (the compiled encoder reads it in place once
        checked, with no ``str`` made).

        >>> ranks = {bytes([b]): b for b in range(256)}
        >>> [a.tolist() for a in BpeTokenizer(ranks=ranks).encode_arrays(["hi", "", "a\\ud800", b"h\\xc3\\xa9"])]
        [[104, 105], [], [97, 239, 191, 189], [104, 195, 169]]

        Raises:
            InputError: ``num_threads`` is not a positive integer (or ``None``).
            TypeError: a text that is neither ``str`` nor ``bytes`` (a ``bytearray`` or
                ``memoryview`` too), whichever encoder runs.
            UnicodeDecodeError: the first ``bytes`` text that is not UTF-8, as ``bytes.decode``
                raises it, with a note (PEP 678: ``__notes__``, shown under the traceback) naming
                its index, e.g. ``texts[1] is not UTF-8 at byte 3``.
        """
        threads = _threads(num_threads)
        if self._compiled is not None:
            listed = list(texts)
            try:
                return _encode_compiled(self._compiled, listed, threads)
            except UnicodeDecodeError as error:
                # The extension raises it for the text itself (its ``object``), the first refused.
                _note_text(error, next((n for n, text in enumerate(listed) if text is error.object), None))
                raise
        raw = functools.partial(self._encoding.encode_to_numpy, allowed_special=set(), disallowed_special=())
        for number, given in enumerate(texts):  # refused as the compiled encoder refuses them
            if not isinstance(given, (str, bytes)):
                raise TypeError(f"texts[{number}] is {type(given).__name__}, not str or bytes")

        def encode(number: int, given: str | bytes) -> np.ndarray:
            try:
                text = given.decode("utf-8") if isinstance(given, bytes) else given
            except UnicodeDecodeError as error:
                _note_text(error, number)
                raise
            with _regex_failures(self.pattern):
                try:
                    return raw(text)
                except UnicodeEncodeError:
                    # What tiktoken's encode() does with a lone surrogate (U+FFFD in its place), so
                    # both paths give the same ids for any str.
                    return raw(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

        if threads == 1 or len(texts) < 2:
            return [encode(number, text) for number, text in enumerate(texts)]
        from concurrent.futures import ThreadPoolExecutor  # here: one encoding thread imports none of it

        with ThreadPoolExecutor(min(threads, len(texts))) as pool:
            return list(pool.map(encode, range(len(texts)), texts))

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The bytes ``ids`` stand for (special tokens as their names).

        Raises:
            InputError: an id outside the vocabulary (below 0 or from ``n_vocab`` on), or an id
                below ``n_vocab`` that no token has (a rank file's gaps), named with its place in ``ids``.
        """
        if isinstance(ids, np.ndarray):
            values = ids.tolist()
        elif isinstance(ids, list) and set(map(type, ids)) <= {int}:
            values = ids  # tiktoken reads a list of ints as it is: no copy id by id
        else:
            values = [int(i) for i in ids]  # numpy scalars, other sequences
        try:
            return self._encoding.decode_bytes(values)
        except (KeyError, OverflowError):  # tiktoken's: an unknown id, or one no u32 holds
            raise self._undecodable(values) from None

    def _undecodable(self, values: list[int]) -> InputError:
        """The error for ``values``, which tiktoken refused: its first id that is no token, named."""
        array = np.asarray(values, dtype=object)
        outside = np.flatnonzero((array < 0) | (array >= self.n_vocab))
        if len(outside):
            at = int(outside[0])
            return InputError(f"ids[{at}] is {values[at]}, outside the vocabulary (n_vocab {self.n_vocab})")
        for at, value in enumerate(values):  # only when decoding failed: the id in a gap
            try:
                self._encoding.decode_single_token_bytes(value)
            except KeyError:
                return InputError(f"ids[{at}] is {value}, an unused id of the vocabulary (n_vocab {self.n_vocab}): "
                                  "no token has it")
        return InputError(f"ids hold an id outside the vocabulary (n_vocab {self.n_vocab})")  # pragma: no cover

    def decode(self, ids: Sequence[int]) -> str:
        """The text ``ids`` stand for; a cut inside a character shows as U+FFFD.

        Raises:
            InputError: an id that is no token (see :meth:`decode_bytes`).
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def to_tokenizer_json(self) -> str:
        """This vocabulary as a Hugging Face ``tokenizer.json`` document.

        Raises:
            InputError: a token that lower ranks cannot build, or a special token spelled as one
                of the ranks' tokens (a document holds one id a spelling).
        """
        return self._tokenizer_json.decode("utf-8")

    def tokenizer_json_bytes(self) -> bytes:
        """:meth:`to_tokenizer_json` as UTF-8, derived once (or taken by :meth:`use_tokenizer_json`)."""
        return self._tokenizer_json

    def refuse_spelled_specials(self) -> None:
        """Refuse a special token spelled as one of the ranks' tokens, as :meth:`to_tokenizer_json`
        does, without deriving anything (:func:`~tokpack.vocab.merge_files.refuse_spelled_specials`).

        Raises:
            InputError: naming the token, its two ids and the fix.
        """
        table = self.__dict__.get("_table")
        refuse_spelled_specials(self.ranks if table is None else table, self.special_tokens, where=self.source)

    def has_tokenizer_json(self) -> bool:
        """Whether this tokenizer holds its ``tokenizer.json`` already (derived or given)."""
        return "_tokenizer_json" in self.__dict__

    def use_tokenizer_json(self, document: bytes, *, sha256: str | None = None) -> None:
        """Take ``document`` as this vocabulary's ``tokenizer.json`` instead of deriving it: the
        caller vouches that it is what :meth:`to_tokenizer_json` gives (a copy of an earlier
        derivation, checked against its record: :mod:`tokpack.vocab.tokenizer_json_cache`, or
        the derivation itself); the packs this tokenizer writes carry it as derived here.
        ``sha256``: the SHA-256 of ``document`` when the caller hashed it (:meth:`file_digests`)."""
        self.__dict__["_tokenizer_json"] = document
        self.__dict__.pop("_tokenizer_json_sha256", None)
        if sha256 is not None:
            self.__dict__["_tokenizer_json_sha256"] = sha256

    def file_digests(self) -> dict[str, str]:
        """The SHA-256 of :meth:`files`' own files (no ``tokenizer_json`` given) that this
        tokenizer knows without hashing them again, by name: the rank file's, and the
        ``tokenizer.json``'s when :meth:`use_tokenizer_json` was given it."""
        known = {RANKS_FILE: self.ranks_sha256}
        if "_tokenizer_json_sha256" in self.__dict__:
            known["tokenizer.json"] = self.__dict__["_tokenizer_json_sha256"]
        return known

    @cached_property
    def _tokenizer_json(self) -> bytes:
        # Built once: every pack (and shard) this tokenizer writes carries it, and deriving its
        # merges is a noticeable part of a prepare's fixed cost for a 100k-rank vocabulary
        # (BENCHMARKS.md, "prepare's fixed cost").
        table = self.__dict__.get("_table")
        joins = None
        if table is not None and bool(np.all(table.ids[1:] > table.ids[:-1])):  # in rank order, as shipped
            joins = published_last_joins(self.ranks_sha256, table.lengths())
        return tokenizer_json_bytes(self.ranks if table is None else table, self.pattern, self.special_tokens,
                                    where=self.source, joins=joins)

    def transformers_files(self) -> dict[str, str]:
        """``tokenizer_config.json`` and ``special_tokens_map.json`` for beside ``tokenizer.json``,
        so ``transformers.AutoTokenizer.from_pretrained(folder)`` loads it with ``eos_token`` and
        ``pad_token`` set to ``<|endoftext|>`` (the padding id of tokpack's windows, too) and
        decodes without its default clean-up of spaces (which would not give the text back).

        >>> files = BpeTokenizer(ranks={bytes([b]): b for b in range(256)}).transformers_files()
        >>> sorted(files), json.loads(files["special_tokens_map.json"])["pad_token"]
        (['special_tokens_map.json', 'tokenizer_config.json'], '<|endoftext|>')
        """
        return transformers_files(self.special_tokens)

    def files(self, *, trained_on: dict[str, str | int] | None = None,
              tokenizer_json: bytes | None = None) -> dict[str, bytes]:
        """Every file a user loads this vocabulary from, by name: ``ranks.tiktoken`` with
        ``vocabulary.json`` (its pattern and special tokens; what :meth:`save` writes), Hugging
        Face's ``tokenizer.json`` (``tokenizer_json``: its bytes, when the caller kept them from
        an earlier call for this vocabulary; else derived now), and :meth:`transformers_files`."""
        ranks_text = self.rank_lines
        record = VocabularyRecord(identity=self.identity, pattern=self.pattern, special_tokens=self.special_tokens,
                                  ranks_sha256=self.ranks_sha256, trained_on=trained_on)
        files = {RANKS_FILE: ranks_text, VOCABULARY_FILE: record.to_json().encode("utf-8"),
                 "tokenizer.json": self._tokenizer_json if tokenizer_json is None else tokenizer_json}
        return files | {name: text.encode("utf-8") for name, text in self.transformers_files().items()}

    def save(self, directory: Path, *, trained_on: dict[str, str | int] | None = None) -> Path:
        """Write ``ranks.tiktoken`` and ``vocabulary.json`` into ``directory``; return the json path.

        A ``directory`` that is new, empty, or holds only a vocabulary saved before is written
        whole: the files go into a temporary folder beside it that then takes its place, so a save
        stopped part way (Ctrl-C, a full disk, a failed write) leaves ``directory`` as it was, and a
        reader sees the old vocabulary or the new one, never parts of both. A folder that holds
        other files too (a model's folder) keeps them: each file is written atomically there and
        the record last, so a save stopped part way leaves a vocabulary saved before whole, or one
        that :meth:`load_saved` refuses (a rank file its record's SHA-256 does not match), never
        half a file.

        The folder this process works in (``save(".")``) is written file by file too, never
        replaced.

        Raises:
            InputError: ``directory`` exists and is not a folder, or is not writable.
        """
        directory = Path(directory)
        folder = save_folder(directory)
        # This process's working folder is written into, not replaced: a replaced one would leave
        # the shell that ran ``bpe train -o .`` in a deleted folder.
        if _holds_other_files(folder) or _is_working_folder(folder):
            self.write_files(folder, trained_on=trained_on)
        else:
            with building(folder, replace=True) as temporary:
                self.write_files(temporary, trained_on=trained_on)
        return directory / VOCABULARY_FILE

    def write_files(self, folder: Path, *, trained_on: dict[str, str | int] | None = None) -> None:
        """Write ``ranks.tiktoken`` and then ``vocabulary.json`` into the existing ``folder``, each
        atomically (:meth:`save` says where that is enough)."""
        record = VocabularyRecord(
            identity=self.identity,
            pattern=self.pattern,
            special_tokens=self.special_tokens,
            ranks_sha256=self.ranks_sha256,
            trained_on=trained_on,
        )
        write_atomically(Path(folder) / RANKS_FILE, self.rank_lines)
        write_record(record, Path(folder) / VOCABULARY_FILE)

    @classmethod
    def load_saved(cls, vocabulary_json: Path) -> BpeTokenizer:
        """Read a directory written by :meth:`save`, checking the rank file and the identity.

        Raises:
            InputError: a missing or altered rank file, one that is no regular file, or an identity
                that no longer matches.
        """
        vocabulary_json = Path(vocabulary_json)
        record = read_record(VocabularyRecord, vocabulary_json)
        ranks_path = vocabulary_json.parent / record.ranks_file
        from tokpack._files import regular_file

        regular_file(ranks_path)  # missing, or a FIFO (which would block) or a device (which may never end)
        ranks_text = ranks_path.read_bytes()
        if hashlib.sha256(ranks_text).hexdigest() != record.ranks_sha256:
            raise InputError(f"SHA-256 differs from {vocabulary_json.name}", where=ranks_path)
        tokenizer = cls.from_rank_text(ranks_text, pattern=record.pattern, special_tokens=record.special_tokens,
                                       source=ranks_path)
        if tokenizer.identity != record.identity:
            raise InputError("recorded identity does not match the vocabulary", where=vocabulary_json)
        return tokenizer

    @staticmethod
    def saved_as(vocabulary_json: Path, identity: VocabIdentity) -> bool:
        """Whether the directory :meth:`save` wrote holds the vocabulary ``identity`` names, told
        from its files' bytes without parsing the ranks: true only when the record's pattern and
        special tokens and the rank file's text are exactly what ``identity`` hashes (a rank file
        in another order or spelling of the same ranks gives false; :meth:`load_saved` decides
        such a one).

        Raises:
            InputError: an unreadable or malformed ``vocabulary.json``.
        """
        vocabulary_json = Path(vocabulary_json)
        record = read_record(VocabularyRecord, vocabulary_json)
        try:
            ranks_text = (vocabulary_json.parent / record.ranks_file).read_bytes()
        except OSError:
            return False
        if record.identity != identity or hashlib.sha256(ranks_text).hexdigest() != record.ranks_sha256:
            return False
        digest = hashlib.sha256(_canonical_header(record.pattern, record.special_tokens))
        digest.update(ranks_text)
        if identity.scheme != SCHEME or digest.hexdigest() != identity.sha256:
            return False
        # The text is the canonical one (sorted by rank), so its last line holds the highest rank.
        try:
            last_rank = int(ranks_text.rstrip(b"\n").rsplit(b" ", 1)[-1])
        except ValueError:
            return False
        return max([last_rank, *record.special_tokens.values()]) + 1 == identity.n_vocab

    def __repr__(self) -> str:
        return f"BpeTokenizer(n_vocab={self.n_vocab}, identity={self.identity.short})"


def save_folder(directory: Path) -> Path:
    """The folder :meth:`BpeTokenizer.save` writes for ``directory`` (symbolic links resolved, so
    the folder they lead to is the one written), checked before anything is written: a command
    calls it before training, so a name it would refuse is refused at once.

    Raises:
        InputError: ``directory`` exists and is not a folder, holds a ``tokenizer.json``
            (Hugging Face would load that one, another vocabulary, from the folder), or is not
            writable.
    """
    directory = Path(directory)
    folder = directory.resolve()
    if os.path.lexists(folder) and not folder.is_dir():
        raise InputError("exists and is not a folder", where=directory, fix="name a folder for the vocabulary")
    if (folder / TOKENIZER_JSON).exists():
        raise InputError(f"holds a {TOKENIZER_JSON}, which Hugging Face would load from this folder in place of the "
                         "vocabulary saved here", where=directory,
                         fix=f"remove {TOKENIZER_JSON} (and tokenizer_config.json), or save into another folder; "
                             "to_tokenizer_json() gives this vocabulary's")
    # A read-only folder is refused as writing into it would be: replacing it whole would get round
    # its permissions, and its old copy, read-only too, could not be deleted after.
    if folder.is_dir() and not os.access(folder, os.W_OK):
        raise InputError("is not writable", where=directory, fix="make it writable (chmod u+w), or name another folder")
    return folder


def _is_working_folder(folder: Path) -> bool:
    """Whether ``folder`` is this process's working folder."""
    try:
        return folder.is_dir() and os.path.samefile(folder, os.getcwd())
    except OSError:  # the working folder was deleted
        return False


def _holds_other_files(folder: Path) -> bool:
    """Whether ``folder`` exists and holds files besides a saved vocabulary's (which a save that
    replaces the folder whole would delete)."""
    return folder.is_dir() and any(not _vocabulary_file(name) for name in os.listdir(folder))


def _vocabulary_file(name: str) -> bool:
    """Whether ``name`` is a saved vocabulary's file, or what a killed write of one left beside it."""
    return name in (RANKS_FILE, VOCABULARY_FILE) or (
        name.startswith((f".{RANKS_FILE}.", f".{VOCABULARY_FILE}.")) and name.endswith(".partial"))


def transformers_files(special_tokens: Mapping[str, int]) -> dict[str, str]:
    """``tokenizer_config.json`` and ``special_tokens_map.json`` for a vocabulary with these
    special tokens (see :meth:`BpeTokenizer.transformers_files`): they depend on nothing else,
    so a carried copy is checked against the vocabulary's record alone."""
    eot_id = special_tokens.get(END_OF_TEXT)
    if eot_id is None:
        return {}
    special = {"eos_token": END_OF_TEXT, "pad_token": END_OF_TEXT}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", **special, "model_max_length": 1_000_000_000_000_000_000,
        "clean_up_tokenization_spaces": False, "add_prefix_space": False,
        # Text that spells <|endoftext|> is text, as for tokpack's encoder: never the special id.
        "split_special_tokens": True,
        "added_tokens_decoder": {str(eot_id): {"content": END_OF_TEXT, "special": True, "lstrip": False,
                                               "rstrip": False, "normalized": False, "single_word": False}},
    }
    return {"tokenizer_config.json": json.dumps(config, indent=2) + "\n",
            "special_tokens_map.json": json.dumps(special, indent=2) + "\n"}


def _threads(num_threads: object) -> int:
    """``num_threads`` checked, or every core for ``None``.

    Raises:
        InputError: not a positive integer.
    """
    if num_threads is None:
        return os.cpu_count() or 1
    return checks.positive_int("num_threads", num_threads, fix="omit it for one per core")


def _canonical_header(pattern: str, special_tokens: Mapping[str, int]) -> bytes:
    """The line before the rank text in :meth:`BpeTokenizer.canonical_bytes`."""
    header = json.dumps({"scheme": SCHEME, "pattern": pattern, "special_tokens": sorted(special_tokens.items())},
                        ensure_ascii=True, separators=(",", ":"))
    return header.encode("ascii") + b"\n"


def _note_text(error: UnicodeDecodeError, number: int | None) -> None:
    """Add to ``error`` (``bytes.decode``'s own, left as it is) a note naming the text it is about,
    ``texts[number]``, and its bytes that are no character: among thousands of texts, its message
    alone does not say which."""
    if number is None:
        return
    where = f"byte {error.start}" if error.end - error.start <= 1 else f"bytes {error.start}-{error.end - 1}"
    note = f"texts[{number}] is not UTF-8 at {where}"
    if hasattr(error, "add_note"):  # Python 3.11+
        error.add_note(note)
    else:
        error.__notes__ = [*getattr(error, "__notes__", []), note]  # type: ignore[attr-defined]


def _encode_compiled(encoder: CompiledBpe, texts: list[str | bytes], threads: int) -> list[np.ndarray]:
    """``encoder.encode(texts)`` on up to ``threads`` threads, each given a run of texts of about
    the same number of characters or bytes (one call of the extension each, which releases the GIL)."""
    if threads == 1 or len(texts) < 2:
        return encoder.encode(texts)
    sizes = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    cuts = np.searchsorted(sizes, sizes[-1] * np.arange(1, threads) / threads, side="right")
    bounds = sorted({0, *cuts.tolist(), len(texts)})
    chunks = [texts[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    if len(chunks) == 1:
        return encoder.encode(texts)
    from concurrent.futures import ThreadPoolExecutor  # here: one encoding thread imports none of it

    with ThreadPoolExecutor(len(chunks)) as pool:
        return [ids for part in pool.map(encoder.encode, chunks) for ids in part]


def encoder_spec(tokenizer: BpeTokenizer) -> dict[str, object]:
    """What ``encoder.json`` records to rebuild ``tokenizer`` (see :mod:`tokpack.engines.encoders`)."""
    spec = TextEncoderSpec(pattern=tokenizer.pattern, special_tokens=tokenizer.special_tokens,
                           ranks=tokenizer.rank_lines.decode("ascii"))
    return spec.model_dump()


def encoder_from_spec(spec: dict[str, object]) -> BpeTokenizer:
    """The tokenizer an ``encoder.json`` spec describes.

    Raises:
        InputError: a spec that is not a text encoder's, or a malformed rank text.
    """
    try:
        checked = TextEncoderSpec.model_validate(spec)
    except ValidationError as error:
        raise InputError(f"not a text encoder's spec: {first_problem(error)}") from None
    # base64: anything else is refused
    return BpeTokenizer.from_rank_text(checked.ranks.encode("utf-8"), pattern=checked.pattern,
                                       special_tokens=checked.special_tokens, source="its ranks")


@contextlib.contextmanager
def _regex_failures(pattern: str) -> Iterator[None]:
    """tiktoken's regex engine gives up on some patterns over long texts (its backtracking stack
    overflows, its step limit) and on some patterns that match the empty string in context: a
    pattern (and input) to change, not a bug in tokpack. Only tiktoken's encoders run inside.

    Raises:
        InputError: for that failure (a ``ValueError`` from ``encode_to_numpy``, a panic from
            ``encode_ordinary``); anything else goes through unchanged.
    """
    try:
        yield
    except BaseException as error:  # pyo3's PanicException derives from BaseException
        said = str(error)
        # Under a pattern with no compiled pre-tokenizer, tiktoken panics on the regex alone (its
        # backtracking limits; an empty match in context, which it slices past): the text is a str.
        given_up = (isinstance(error, ValueError) and said.startswith("Regex error")) or (
            type(error).__name__ == "PanicException")
        if not given_up:
            raise
        raise InputError(f"tiktoken's regex engine gave up on the pattern '{_shown(pattern)}' "
                         f"({said.splitlines()[0][:160]})",
                         fix="use a named pattern (compiled: gpt4, gpt2, polish, polish-phrase) or a simpler "
                             "regex, or cut shorter documents (document_bytes)") from None


def _shown(pattern: str) -> str:
    """A pattern as an error message quotes it: its first 57 characters and "..." if longer."""
    return pattern if len(pattern) <= 60 else pattern[:57] + "..."
