"""The vocabulary files that list merges in GPT-2's byte alphabet: GPT-2's ``encoder.json`` and
``vocab.bpe``, and Hugging Face's ``tokenizer.json`` (read, checked against tiktoken's rank rule, and
written).

Each reader returns plain data (ranks as ``{token bytes: id}``); building an encoder from it is
:mod:`tokpack.vocab.bytelevel`'s job. tiktoken's rank files are :mod:`tokpack.vocab.rank_files`'.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokpack.errors import InputError
from tokpack.vocab.patterns import GPT2_PATTERN, check_pattern
from tokpack.vocab.rank_files import RANK_LIMIT, Ranks, TokenTable, decimal_digits, in_rank_order, scatter_runs

if TYPE_CHECKING:
    import numpy as np


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte, used by ``encoder.json`` and ``tokenizer.json``.

    Printable Latin-1 bytes stand for themselves; the other 68 are shifted past U+0100.

    >>> byte_to_unicode()[ord("a")], byte_to_unicode()[ord(" ")]
    ('a', 'Ġ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    mapping = {byte: chr(byte) for byte in printable}
    shifted = (byte for byte in range(256) if byte not in mapping)
    mapping.update({byte: chr(256 + index) for index, byte in enumerate(shifted)})
    return mapping


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    return {char: byte for byte, char in byte_to_unicode().items()}


def unicode_to_bytes(token: str, *, where: str) -> bytes:
    """Undo :func:`byte_to_unicode` for one vocabulary entry.

    Raises:
        InputError: the entry holds a character outside GPT-2's byte alphabet.
    """
    table = _unicode_to_byte()
    try:
        return bytes(table[char] for char in token)
    except KeyError as error:
        raise InputError(f"token {token!r} is not in the byte-level alphabet ({error})", where=where) from None


def read_gpt2_pair(encoder_json: Path, vocab_bpe: Path) -> tuple[Ranks, dict[str, int]]:
    """Read GPT-2's ``encoder.json`` and ``vocab.bpe``; return ranks and special tokens.

    The ids of ``encoder.json`` are the ranks. ``vocab.bpe`` is checked against them: the
    ``i``-th merge must make the token whose id is ``256 + i``, from the two parts tiktoken's rank
    rule joins last (the merges :func:`derive_merges` gives), so the rank rule gives GPT-2's
    merges (see :func:`read_tokenizer_json` for why). A token of several characters that no merge
    makes (``<|endoftext|>``) is a special token: neither GPT-2 nor Hugging Face makes it from text.

    Raises:
        InputError: unreadable files, or merges that disagree with the ids or the rank rule.
    """
    try:
        encoder: dict[str, int] = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # ValueError: bad JSON, UTF-8 or a 5,000-digit number
        raise InputError(str(error).split(';')[0], where=encoder_json) from None
    if not isinstance(encoder, dict) or not all(_is_id(rank) for rank in encoder.values()):
        raise InputError("not GPT-2's encoder.json: it must map each token (a string) to an id in "
                         "[0, 2**32)", where=encoder_json, fix="pass (encoder.json, vocab.bpe) in this order")
    try:
        merges = Path(vocab_bpe).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError(f"cannot read ({error.strerror or error})", where=vocab_bpe) from None
    except UnicodeDecodeError as error:
        raise InputError("not GPT-2's vocab.bpe (not UTF-8)", where=vocab_bpe, byte=error.start) from None
    merges = [line for line in merges if line and not line.startswith("#version")]
    pairs: list[tuple[str, str]] = []
    for index, line in enumerate(merges):
        parts = line.split(" ")
        if len(parts) != 2 or encoder.get("".join(parts)) != 256 + index:
            raise InputError(f"merge {index + 1} ({line!r}) does not make id {256 + index}", where=vocab_bpe)
        pairs.append((parts[0], parts[1]))
    made = {left + right for left, right in pairs}
    unmade = {token for token in encoder if len(token) > 1 and token not in made}
    specials = {unicode_to_bytes(token, where=str(encoder_json)).decode("utf-8", errors="replace"): encoder[token]
                for token in unmade}
    ranks = {unicode_to_bytes(token, where=str(encoder_json)): rank for token, rank in encoder.items()
             if token not in unmade}
    _check_rank_rule(pairs, ranks, vocab_bpe)
    return ranks, specials


def spell_tokens(tokens: list[bytes]) -> list[str]:
    """Each token in GPT-2's byte alphabet (:func:`byte_to_unicode`), as ``encoder.json`` and
    ``tokenizer.json`` write it: all of them decoded in one call, then cut apart.

    >>> spell_tokens([b"a b", b"", b"\\n"])
    ['aĠb', '', 'Ċ']
    """
    alphabet = byte_to_unicode()
    table = "".join(alphabet[byte] for byte in range(256))
    text = codecs.charmap_decode(b"".join(tokens), "strict", table)[0]
    ends = list(itertools.accumulate(map(len, tokens)))
    return [text[end - len(token) : end] for token, end in zip(tokens, ends)]


def derive_merges(ranks: Ranks, *, where: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
    """The merge list implied by ranks: for each multi-byte token in rank order, the two parts
    that tiktoken's rank rule joins last when it encodes that token alone.

    >>> derive_merges({b"a": 0, b"b": 1, b"ab": 2, b"abb": 3})
    [('a', 'b'), ('ab', 'b')]

    Raises:
        InputError: a token that lower ranks cannot build (naming ``where``, the file the ranks
            came from, if given).
    """
    tokens, order = in_rank_order(ranks)
    found = _last_merges(tokens, order, where)
    if found is None:  # two tokens' keys collide (never seen in a real vocabulary): the plain rule
        return _derive_merges_python(ranks, list(zip(tokens, order.tolist())), where)
    # One code point per byte: each part is a slice of its token's spelling.
    return [(spelled[:cut], spelled[cut:]) for spelled, cut in zip(spell_tokens(tokens), found.tolist()) if cut]


def _last_merges(tokens: list[bytes], ranks: np.ndarray, where: str | os.PathLike[str] | None) -> np.ndarray | None:
    """The length of each token's left part in its last merge (0: a single byte), for ``tokens``
    in rank order (``ranks``), or ``None`` when, without the compiled encoder, the numpy rule cannot
    tell tokens apart.

    Raises:
        InputError: a token that lower ranks cannot build.
    """
    from tokpack.vocab.compiled import last_joins

    found = last_joins(tokens, ranks)
    if found is None:  # without the compiled extension: the same rule in numpy
        from tokpack.vocab._merges import split_points

        found = split_points(tokens, ranks)
    if found is None:
        return None
    left, bad = found
    if bad >= 0:
        raise _unbuildable(tokens[bad], int(ranks[bad]), where)
    return left


def _unbuildable(token: bytes, rank: int, where: str | os.PathLike[str] | None) -> InputError:
    """The error of a token that lower ranks cannot build."""
    fix = "every token of two or more bytes must be the join of two lower-ranked tokens, as in tiktoken's rank files"
    if where is not None:
        fix += ": was a line deleted or a rank changed?"
    return InputError(f"token {token!r} (rank {rank}) cannot be built from lower ranks", where=where, fix=fix)


def _derive_merges_python(ranks: Ranks, ordered: list[tuple[bytes, int]],
                          where: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
    """:func:`derive_merges` over ``ordered`` (``ranks``' items in rank order), in Python."""
    alphabet = byte_to_unicode()
    ranks_get = ranks.get
    merges = []
    for token, rank in ordered:
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            # Join the adjacent pair whose concatenation has the lowest rank below this token.
            best = min(
                (ranks_get(parts[i] + parts[i + 1], rank), i) for i in range(len(parts) - 1)
            )
            if best[0] >= rank:
                raise _unbuildable(token, rank, where)
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        merges.append(tuple("".join(alphabet[b] for b in part) for part in parts))
    return merges  # type: ignore[return-value]


def read_tokenizer_json(path: Path) -> tuple[Ranks, str, dict[str, int]]:
    """Read a Hugging Face byte-level BPE ``tokenizer.json``: ranks, pattern, special tokens.

    The pattern comes from the pre-tokenizer: ``ByteLevel`` with its own regex means GPT-2's;
    ``Split`` on a regex followed by ``ByteLevel(use_regex=false)`` means that regex. Special
    tokens are the added tokens, and the model's tokens of several bytes that no merge makes
    (Hugging Face never makes them from text either; :func:`tokenizer_json` writes
    ``<|endoftext|>`` so). Text is encoded literally, as Hugging Face does with
    ``encode_special_tokens`` set; an added token that is not special is refused, as Hugging Face
    reads it from text even then.

    tokpack encodes by tiktoken's rank rule (any two adjacent tokens whose join is in the
    vocabulary merge, lowest id first), Hugging Face by its merges (only listed pairs, in list
    order). They agree when the merges are exactly those the ids imply (:func:`derive_merges`):
    each token made once, from the two parts the rank rule joins last, in id order. A file whose
    merges say otherwise (a merge ``a bc`` where the rank rule makes ``ab`` + ``c`` first, a token
    made twice, merges appended to a trained vocabulary in another order) is refused, naming the
    first such merge. ``ignore_merges`` (Hugging Face takes a word that is one token of the
    vocabulary whole, as tiktoken does) changes nothing then, so it is read as it is, unless a
    token no merge makes could be such a word: Hugging Face would make it from text, and the rank
    rule cannot make a token from whole words only; that is refused.

    Raises:
        InputError: not a byte-level BPE, a normalizer or a prefix space (which tiktoken's rules
            cannot reproduce), merges that are not what the ids imply, ``ignore_merges`` with a
            token that only it makes, an added token that is not special, or an unreadable file.
    """
    try:
        document: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        model = document["model"]
    except (OSError, ValueError, RecursionError, KeyError, TypeError) as error:  # ValueError: JSON, UTF-8, digits
        raise InputError(f"not a tokenizer.json ({str(error).split(';')[0]})", where=path) from None
    if not isinstance(document, dict) or not isinstance(model, dict):
        raise InputError("not a tokenizer.json ('model' is not an object)", where=path)
    if model.get("type") != "BPE":
        raise InputError(f"model is {model.get('type')!r}, not a BPE", where=path)
    if document.get("normalizer") is not None:
        raise InputError("has a normalizer; tokpack encodes raw text only", where=path)
    _refuse_what_ranks_cannot_reproduce(document, model, path)
    vocab, added = model.get("vocab"), document.get("added_tokens") or []
    if not isinstance(vocab, dict) or not all(isinstance(token, str) and _is_id(rank) for token, rank in vocab.items()):
        raise InputError("model.vocab must map each token (a string) to an id in [0, 2**32)", where=path)
    if not isinstance(added, list) or not all(isinstance(entry, dict) and isinstance(entry.get("content"), str)
                                              and _is_id(entry.get("id")) for entry in added):
        raise InputError("added_tokens must be objects with a string 'content' and an id in [0, 2**32)", where=path)
    owners: dict[int, str] = {}
    for token, rank in [*vocab.items(), *((entry["content"], entry["id"]) for entry in added if entry["content"] not in vocab)]:
        if owners.setdefault(rank, token) != token:  # Hugging Face would decode the id as one of them only
            raise InputError(f"id {rank} is both {owners[rank]!r} and {token!r}", where=path,
                             fix="give each token its own id (a file edited by hand, or two vocabularies merged?)")
    plain = next((entry for entry in added if entry.get("special") is not True), None)
    if plain is not None:  # Hugging Face reads these from text whatever encode_special_tokens says
        raise InputError(f"added token {plain['content']!r} (id {plain['id']}) is not special: Hugging Face "
                         "reads it from text in every setting, tokpack never does, so their ids would differ", where=path,
                         fix='mark it "special": true, or remove it from added_tokens')
    try:
        pattern = _pattern_of(document.get("pre_tokenizer"), path)
    except (AttributeError, KeyError, TypeError) as error:  # a field of the wrong shape
        raise InputError(f"malformed pre_tokenizer ({type(error).__name__}: {error})", where=path) from None
    specials = {entry["content"]: entry["id"] for entry in added}
    pairs = _merge_pairs(model.get("merges"), vocab, path)
    made = {left + right for left, right in pairs}
    for token, rank in vocab.items():
        if len(token) > 1 and token not in made and token not in specials and rank not in specials.values():
            name = unicode_to_bytes(token, where=str(path))
            if model.get("ignore_merges") and _one_piece(name, pattern):
                raise InputError(f"model.ignore_merges is true and no merge makes {token!r} (id {rank}): Hugging Face "
                                 f"encodes a word spelled {name.decode('utf-8')!r} as that id, but tiktoken's rank rule, "
                                 "which tokpack encodes by, makes a token from merges only", where=path,
                                 fix=f'add the merge that makes it, or set "ignore_merges": false (then {token!r} is '
                                     "a special token, never made from text)")
            specials[name.decode("utf-8", errors="replace")] = rank
    ranks = {
        unicode_to_bytes(token, where=str(path)): rank
        for token, rank in vocab.items()
        if rank not in specials.values()
    }
    _check_rank_rule(pairs, ranks, path)
    return ranks, pattern, specials


def _one_piece(token: bytes, pattern: str) -> bool:
    """Whether the pre-tokenizer can give ``token`` whole as one word: it is text that
    ``pattern`` keeps in one piece (so ``ignore_merges`` would make it from that text).

    >>> _one_piece(b"abc", GPT2_PATTERN), _one_piece(b"<|endoftext|>", GPT2_PATTERN), _one_piece(b"\\xc5", GPT2_PATTERN)
    (True, False, False)
    """
    import regex

    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:  # words are text: part of a character is never one
        return False
    return regex.findall(pattern, text) == [text]


def _check_rank_rule(pairs: list[tuple[str, str]], ranks: Ranks, path: Path) -> None:
    """Refuse merges that tiktoken's rank rule would not make (see :func:`read_tokenizer_json`).

    Raises:
        InputError: naming the file, the first merge that differs from the ones the ids imply
            and the pair the rank rule joins instead, and what to do.
    """
    fix = ("to encode as the file says, encode with Hugging Face tokenizers (datatrove, say) and bring the ids in "
           "with tokpack import; or list the merges its ids imply, so both encode alike")
    reason = ("Hugging Face merges only listed pairs; tiktoken's rank rule, which tokpack encodes by, joins any two "
              "adjacent tokens whose join is in the vocabulary, lowest id first, so their ids would differ")
    try:
        implied = derive_merges(ranks)
    except InputError as error:  # a token made from a part that only a later merge makes
        raise InputError(f"{str(error).split(';')[0]}: its merges use a part before a merge makes it; {reason}",
                         where=path, fix=fix) from None
    if pairs == implied:
        return
    at = next((index for index, (given, rule) in enumerate(zip(pairs, implied)) if given != rule), min(len(pairs), len(implied)))
    if at < len(pairs):
        left, right = pairs[at]
        earlier = next((index for index, pair in enumerate(pairs[:at]) if pair[0] + pair[1] == left + right), None)
        if earlier is not None:
            raise InputError(f"merge {at + 1} ({left + ' ' + right!r}) makes {left + right!r} again (merge {earlier + 1} "
                             f"made it): {reason}", where=path, fix=fix)
        rule = next((pair for pair in implied if pair[0] + pair[1] == left + right), None)
        if rule is not None:
            raise InputError(f"merge {at + 1} ({left + ' ' + right!r}) makes {left + right!r}, which tiktoken's rank rule "
                             f"makes from {rule[0]!r} + {rule[1]!r}: {reason}", where=path,
                             fix=fix.replace("list the merges its ids imply", f"make it {rule[0] + ' ' + rule[1]!r}"))
    raise InputError(f"merge {at + 1} is not the one its ids imply: {reason}", where=path, fix=fix)


#: Post-processors that leave the ids alone (``ByteLevel`` only trims offsets).
_IDLE_POST_PROCESSORS = {"ByteLevel"}


def _refuse_what_ranks_cannot_reproduce(document: dict[str, Any], model: dict[str, Any], path: Path) -> None:
    """Refuse the fields with which Hugging Face would give other ids than tiktoken's rank rule:
    a dropout (random merges), affixes on subwords, and a post-processor that adds tokens.

    Raises:
        InputError: naming the file and the field.
    """
    fix = "remove the field from the file (tokpack encodes as tiktoken does), or use another vocabulary"
    if model.get("dropout") not in (None, 0, 0.0):
        raise InputError(f"model.dropout is {model['dropout']!r}: Hugging Face skips merges at random", where=path,
                         fix=fix)
    for field in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(field):
            raise InputError(f"model.{field} is {model[field]!r}: Hugging Face marks subwords with it", where=path, fix=fix)
    post = document.get("post_processor")
    steps = [] if post is None else [post]
    if steps and isinstance(post, dict) and post.get("type") == "Sequence":
        steps = post.get("processors") or []
    kinds = [step.get("type") if isinstance(step, dict) else step for step in steps]
    if any(kind not in _IDLE_POST_PROCESSORS for kind in kinds):
        raise InputError(f"post_processor {kinds} adds tokens to what Hugging Face encodes; tokpack's "
                         "ids are the text's alone", where=path, fix=fix)


def _merge_pairs(merges: object, vocab: dict[str, int], path: Path) -> list[tuple[str, str]]:
    """The merges as pairs, after checking that the tokens they make are in the vocabulary and
    that their ids rise in merge order (where a token is first made).

    Raises:
        InputError: naming the file and the first merge whose id is above a later merge's, or a
            merge that is malformed or makes a token outside the vocabulary.
    """
    import numpy as np

    if merges is None:
        return []
    if not isinstance(merges, list):
        raise InputError("model.merges must be a list", where=path)
    pairs: list[tuple[str, str]] = []
    for index, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(part, str) for part in parts):
            raise InputError(f"merge {index + 1} ({merge!r}) is not two tokens", where=path)
        pairs.append((parts[0], parts[1]))
    results = [left + right for left, right in pairs]
    unknown = next((index for index, token in enumerate(results) if token not in vocab), None)
    if unknown is not None:
        raise InputError(f"merge {unknown + 1} ({' '.join(pairs[unknown])!r}) makes {results[unknown]!r}, "
                         "which is not in model.vocab", where=path)
    if not results:
        return pairs
    ids = np.fromiter((vocab[token] for token in results), np.int64, count=len(results))
    _, first = np.unique(np.asarray(results, dtype=object), return_index=True)
    order = np.sort(first)  # each token where a merge first makes it, in merge order
    ranked = ids[order]
    later_lowest = np.minimum.accumulate(ranked[::-1])[::-1]  # the lowest id made from here on
    bad = np.flatnonzero(ranked[:-1] > later_lowest[1:])
    if len(bad):
        at = int(order[bad[0]])
        then = int(order[bad[0] + 1 + int(np.argmin(ranked[bad[0] + 1 :]))])
        raise InputError(f"merge {at + 1} ({' '.join(pairs[at])!r}) makes id {ids[at]}, above the id {ids[then]} of "
                         f"merge {then + 1} ({' '.join(pairs[then])!r}): its merges contradict its vocabulary, so "
                         "Hugging Face and tiktoken would encode differently", where=path,
                         fix="use the tokenizer.json the vocabulary was trained with")
    return pairs


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < RANK_LIMIT


def _pattern_of(pre_tokenizer: dict[str, Any] | None, path: Path) -> str:
    steps = [] if pre_tokenizer is None else [pre_tokenizer]
    if steps and steps[0].get("type") == "Sequence":
        steps = steps[0]["pretokenizers"]
    kinds = [step.get("type") for step in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        pattern = GPT2_PATTERN
    elif kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        split = steps[0]
        if split.get("behavior") != "Isolated" or split.get("invert") or "Regex" not in split["pattern"]:
            raise InputError("only an isolated, non-inverted regex Split is supported", where=path)
        pattern = check_pattern(split["pattern"]["Regex"], path)
    else:
        raise InputError(f"unsupported pre-tokenizer {kinds}; expected a byte-level one", where=path)
    if steps[-1].get("add_prefix_space"):
        raise InputError("add_prefix_space changes the text; tokpack refuses it", where=path)
    return pattern


#: The version of how :func:`tokenizer_json` lays its document out: one more whenever the bytes it
#: writes for a vocabulary change, so a copy kept in the cache (:mod:`tokpack.vocab.tokenizer_json_cache`)
#: from an earlier layout is never reused.
TOKENIZER_JSON_LAYOUT = 1


def tokenizer_json(ranks: Ranks, pattern: str, specials: dict[str, int], *,
                   where: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A self-contained Hugging Face ``tokenizer.json`` (as a dict) for a byte-level vocabulary:
    a regex ``Split``, ``ByteLevel`` pre-tokenizer and decoder, and merges from :func:`derive_merges`;
    the special tokens are in the model's vocabulary, so no text is ever encoded as one (as in tiktoken's
    ``encode_ordinary``). ``where`` is the file the ranks came from, named by an error about them.

    Raises:
        InputError: as :func:`derive_merges`, or a special token spelled as one of the ranks'
            tokens (:func:`refuse_spelled_specials`).
    """
    refuse_spelled_specials(ranks, specials, where=where)
    vocab = dict(zip(spell_tokens(list(ranks)), ranks.values()))
    # Special tokens are model tokens that no merge makes, not added tokens: Hugging Face matches
    # an added token wherever its name appears in the text, tiktoken's encode_ordinary never does.
    # Written in the byte alphabet, they decode to their names; :func:`read_tokenizer_json` reads
    # them back as special tokens.
    vocab |= dict(zip(spell_tokens([token.encode("utf-8") for token in specials]), specials.values()))
    return _document(pattern, dict(sorted(vocab.items(), key=lambda item: item[1])),
                     [list(pair) for pair in derive_merges(ranks, where=where)])


def _document(pattern: str, vocab: dict[str, int], merges: list[list[str]]) -> dict[str, Any]:
    """:func:`tokenizer_json`'s document of ``vocab`` and ``merges`` (in GPT-2's alphabet, in order)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def _skeleton(pattern: str) -> tuple[bytes, bytes, bytes]:
    """:func:`tokenizer_json_bytes`' text around its vocabulary's entries and its merges' pairs."""
    skeleton = json.dumps(_document(pattern, {}, []), ensure_ascii=False).encode("utf-8")
    tail = b'"vocab": {}, "merges": []}}'
    assert skeleton.endswith(tail), skeleton[-80:]
    return skeleton[: -len(tail)] + b'"vocab": {', b'}, "merges": [', b"]}}"


def tokenizer_json_bytes(ranks: Ranks | TokenTable, pattern: str, specials: dict[str, int], *,
                         where: str | os.PathLike[str] | None = None, joins: np.ndarray | None = None) -> bytes:
    """:func:`tokenizer_json` as UTF-8 text, byte for byte what ``json.dumps(...,
    ensure_ascii=False)`` writes, not built as Python objects: written whole by the compiled
    encoder's extension from the tokens' table (:func:`~tokpack.vocab.compiled.tokenizer_json_text`)
    and :func:`derive_merges`' cuts; without it, its vocabulary and merges by numpy. ``ranks``: a
    dict, or the same tokens as a :class:`~tokpack.vocab.rank_files.TokenTable` (its order standing
    for the dict's). ``joins``: those cuts, the tokens in rank order, when the caller has them
    already (a published vocabulary's shipped ones:
    :func:`~tokpack.vocab.published.published_last_joins`); else they are derived here.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b'a"': 256}
    >>> text = tokenizer_json_bytes(ranks, GPT2_PATTERN, {"<|endoftext|>": 257})
    >>> text == json.dumps(tokenizer_json(ranks, GPT2_PATTERN, {"<|endoftext|>": 257}), ensure_ascii=False).encode()
    True
    >>> tokenizer_json_bytes(TokenTable.of(ranks), GPT2_PATTERN, {"<|endoftext|>": 257}) == text
    True

    Raises:
        InputError: as :func:`tokenizer_json`.
    """
    import numpy as np

    refuse_spelled_specials(ranks, specials, where=where)
    names = [name.encode("utf-8") for name in specials]
    text = _compiled_document(ranks, pattern, specials, where=where, joins=joins)
    if text is not None:
        return text
    if isinstance(ranks, TokenTable):
        tokens, order = _table_in_rank_order(ranks)
    else:
        tokens, order = in_rank_order(ranks)
    left = joins if joins is not None else _last_merges(tokens, order, where)
    if left is None:  # the numpy rule cannot tell these tokens apart: the dict's document
        ranks = ranks.ranks() if isinstance(ranks, TokenTable) else ranks
        return json.dumps(tokenizer_json(ranks, pattern, specials, where=where), ensure_ascii=False).encode("utf-8")
    head, middle, tail = _skeleton(pattern)
    entries = [*tokens, *names]
    ids = np.concatenate([order, np.fromiter(specials.values(), dtype=np.int64, count=len(specials))])
    if not bool(np.all(ids[1:] > ids[:-1])):  # special tokens among the ranks' ids: in id order
        by_id = np.argsort(ids, kind="stable")
        entries, ids = [entries[i] for i in by_id.tolist()], ids[by_id]
    vocab = _json_entries(entries, ids)
    merges = _json_pairs(tokens, left)
    return b"".join([head, vocab, middle, merges, tail])


def _compiled_document(ranks: Ranks | TokenTable, pattern: str, specials: dict[str, int], *,
                       where: str | os.PathLike[str] | None, joins: np.ndarray | None) -> bytes | None:
    """:func:`tokenizer_json_bytes` of ranks no special token spells, written whole by the compiled
    extension from the tokens' table (no bytes object a token); ``None`` without the extension, or
    when the joins are to be derived and an id is beyond its tables.

    Raises:
        InputError: as :func:`derive_merges`.
    """
    import numpy as np

    from tokpack.vocab.compiled import table_last_joins, tokenizer_json_text

    table = ranks if isinstance(ranks, TokenTable) else TokenTable.of(ranks)
    if joins is None:
        found = table_last_joins(table)
        if found is None:
            return None
        cuts, bad = found
        if bad >= 0:
            token = table.joined[int(table.ends[bad - 1]) if bad else 0 : int(table.ends[bad])]
            raise _unbuildable(token, int(table.ids[bad]), where)
    elif bool(np.all(table.ids[1:] > table.ids[:-1])):
        cuts = joins
    else:  # joins in rank order, cuts in the table's
        cuts = np.empty(len(joins), np.int64)
        cuts[np.argsort(table.ids, kind="stable")] = joins
    names = [name.encode("utf-8") for name in specials]
    name_ids = np.fromiter(specials.values(), dtype=np.int64, count=len(specials))
    by_id = np.argsort(name_ids, kind="stable")
    return tokenizer_json_text(table, cuts, [names[i] for i in by_id.tolist()], name_ids[by_id], _json_spellings(),
                               _skeleton(pattern))


def _table_in_rank_order(table: TokenTable) -> tuple[list[bytes], np.ndarray]:
    """:func:`~tokpack.vocab.rank_files.in_rank_order` of a table's tokens (ties: none, ids are distinct)."""
    import numpy as np

    tokens, ids = table.tokens(), table.ids
    if bool(np.all(ids[1:] > ids[:-1])):
        return tokens, ids
    order = np.argsort(ids, kind="stable")
    return [tokens[i] for i in order.tolist()], ids[order]


def refuse_spelled_specials(ranks: Ranks | TokenTable, specials: Mapping[str, int], *,
                            where: str | os.PathLike[str] | None = None) -> None:
    """Refuse a special token spelled as one of the ranks' tokens (under another id: the two never
    share one). tiktoken keeps both ids apart (``encode_ordinary`` gives the rank, the special is
    never read from text); a ``tokenizer.json``'s vocabulary holds one id a spelling, so Hugging
    Face's ids would differ from tiktoken's on text that spells it.

    >>> refuse_spelled_specials({b"<|": 256, b"<|x|>": 257}, {"<|x|>": 258})
    Traceback (most recent call last):
    ...
    tokpack.errors.InputError: the ordinary token '<|x|>' (id 257) is spelled as the special token '<|x|>' (id 258): a tokenizer.json holds one id a spelling, so Hugging Face's ids would differ from tiktoken's on text that spells it; train the vocabulary again (tokpack's trainers cut the special tokens' spellings out of the text), or rename the special token or remove that rank

    Raises:
        InputError: naming the token, its two ids and the fix.
    """
    names = [name.encode("utf-8") for name in specials]
    if isinstance(ranks, TokenTable):
        found = _spelled_at(ranks, names)
    else:
        found = next(((index, ranks[name]) for index, name in enumerate(names) if name in ranks), None)
    if found is None:
        return
    index, rank = found
    name = list(specials)[index]
    raise InputError(f"the ordinary token {name!r} (id {rank}) is spelled as the special token {name!r} "
                     f"(id {specials[name]}): a tokenizer.json holds one id a spelling, so Hugging Face's ids "
                     "would differ from tiktoken's on text that spells it", where=where,
                     fix="train the vocabulary again (tokpack's trainers cut the special tokens' spellings out of "
                         "the text), or rename the special token or remove that rank")


def _spelled_at(table: TokenTable, names: list[bytes]) -> tuple[int, int] | None:
    """The first of ``names`` that is one of the table's tokens, as its index and that token's id
    (``None``: none is): compared with the tokens of its length only, in the table's buffer (no
    bytes object made for a token).

    >>> table = TokenTable.of({b"a": 0, b"<|x|>": 1, b"bc": 2})
    >>> _spelled_at(table, [b"<|y|>", b"bd"]), _spelled_at(table, [b"<|y|>", b"bc"])
    (None, (1, 2))
    """
    import numpy as np

    if not names:
        return None
    lengths, joined = table.lengths(), np.frombuffer(table.joined, np.uint8)
    for index, name in enumerate(names):
        same = np.flatnonzero(lengths == len(name))
        if len(name) and len(same):  # each such token's bytes, a row each, against the name's
            rows = joined[(table.ends[same] - len(name))[:, None] + np.arange(len(name))]
            hits = np.flatnonzero(np.all(rows == np.frombuffer(name, np.uint8), axis=1))
            if len(hits):
                return index, int(table.ids[same[hits[0]]])
    return None


@lru_cache(maxsize=1)
def _escapes() -> tuple[str, np.ndarray]:
    """GPT-2's alphabet as a ``charmap`` decoding table, and each byte's spelling's length as a
    JSON string's UTF-8 (escaped as ``json.dumps`` escapes it: only ``"`` and ``\\`` need it)."""
    import numpy as np

    alphabet = byte_to_unicode()
    widths = [len(json.dumps(alphabet[byte], ensure_ascii=False)[1:-1].encode("utf-8")) for byte in range(256)]
    return "".join(alphabet[byte] for byte in range(256)), np.array(widths, np.int64)


@lru_cache(maxsize=1)
def _json_spellings() -> list[bytes]:
    """Each byte's spelling in GPT-2's alphabet as a JSON string's UTF-8, escaped as ``json.dumps``
    escapes it (only ``"`` and ``\\`` need it)."""
    alphabet = byte_to_unicode()
    return [json.dumps(alphabet[byte], ensure_ascii=False)[1:-1].encode("utf-8") for byte in range(256)]


def _spelled(tokens: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens' JSON-escaped spellings, one after another, each byte's spelled width, and
    each token's."""
    import numpy as np

    table, widths = _escapes()
    joined = b"".join(tokens)
    text = codecs.charmap_decode(joined, "strict", table)[0].replace("\\", "\\\\").replace('"', '\\"')
    spelled = np.frombuffer(text.encode("utf-8"), np.uint8)
    byte_widths = widths[np.frombuffer(joined, np.uint8)]
    ends = np.cumsum(np.fromiter(map(len, tokens), np.int64, count=len(tokens)))
    return spelled, byte_widths, _run_sums(byte_widths, ends)


def _run_sums(values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The sum of each run of ``values`` ending (exclusive) at ``ends``, runs one after another."""
    import numpy as np

    total = np.concatenate([[0], np.cumsum(values)])
    return np.diff(total[ends], prepend=0)


def _json_entries(keys: list[bytes], values: np.ndarray) -> bytes:
    """``"key": value`` for each token and id, joined by ``", "``, as ``json.dumps`` writes a dict."""
    import numpy as np

    from tokpack.vocab.compiled import entries_json

    text = entries_json(keys, values, _json_spellings())
    if text is not None:
        return text
    spelled, _, key_widths = _spelled(keys)
    digits, digit_counts = decimal_digits(values)
    sizes = 1 + key_widths + 3 + digit_counts + 2  # "key": value,
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), np.uint8)
    scatter_runs(out, starts + 1, key_widths, spelled)
    scatter_runs(out, starts + key_widths + 4, digit_counts, digits)
    ends = starts + sizes
    for offset, byte in ((starts, b'"'), (starts + key_widths + 1, b'"'), (starts + key_widths + 2, b":"),
                         (starts + key_widths + 3, b" "), (ends - 2, b","), (ends - 1, b" ")):
        out[offset] = ord(byte)
    return out[:-2].tobytes()


def _json_pairs(tokens: list[bytes], cuts: np.ndarray) -> bytes:
    """``["left", "right"]`` for each token cut in two (``cuts``: the left part's length; 0: not
    cut, left out), joined by ``", "``, as ``json.dumps`` writes a list of pairs."""
    import numpy as np

    from tokpack.vocab.compiled import pairs_json

    text = pairs_json(tokens, cuts, _json_spellings())
    if text is not None:
        return text
    spelled, byte_widths, widths = _spelled(tokens)
    sizes = np.fromiter(map(len, tokens), np.int64, count=len(tokens))
    owner = np.repeat(np.arange(len(tokens)), sizes)
    within = np.arange(len(byte_widths)) - (np.cumsum(sizes) - sizes)[owner]
    before = np.cumsum(byte_widths) - byte_widths - (np.cumsum(widths) - widths)[owner]  # within its token
    kept = np.flatnonzero(cuts)
    total = 2 + widths[kept] + 4 + 2 + 2  # ["left", "right"],
    starts = np.full(len(tokens), -1, np.int64)
    starts[kept] = np.cumsum(total) - total
    # Where each byte's spelling starts: after '["', the bytes before it, and '", "' past the cut.
    at = starts[owner] + 2 + before + 4 * (within >= cuts[owner])
    in_kept = starts[owner] >= 0
    out = np.empty(int(total.sum()), np.uint8)
    spelled_kept = spelled[np.repeat(in_kept, byte_widths)]
    scatter_runs(out, at[in_kept], byte_widths[in_kept], spelled_kept)
    left_widths = _run_sums(byte_widths * (within < cuts[owner]), np.cumsum(sizes))[kept]
    starts = starts[kept]
    ends = starts + total
    middle = starts + 2 + left_widths
    for offset, byte in ((starts, b"["), (starts + 1, b'"'), (middle, b'"'), (middle + 1, b","), (middle + 2, b" "),
                         (middle + 3, b'"'), (ends - 4, b'"'), (ends - 3, b"]"), (ends - 2, b","), (ends - 1, b" ")):
        out[offset] = ord(byte)
    return out[:-2].tobytes()
