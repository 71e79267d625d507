"""The bpe scheme: byte-pair merges learnt over spaceless UCI, so one token may span several moves.

A game's text is its UCI moves without spaces (``e2e4e7e5g1f3...``); Hugging Face
``tokenizers`` learns the merges over whole games (no pre-tokenizer, so a merge may cross a
move boundary). The special tokens are the uci scheme's, with the same ids (``<pad>`` 0,
``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3, then the four results), so a loss with
``ignore_index=0`` masks padding and nothing else in every scheme; :class:`BpeEncoder` refuses a
tokenizer where that is not so. The alphabet is the 20 characters UCI uses (``a``-``h``,
``1``-``8``, ``n b r q``); anything else encodes as ``<unk>``.

A game is ``<bos>, ids..., result, <eos>`` (three framing tokens; the ratings are not
encoded). :func:`split_moves` puts the move boundaries back into the decoded text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tokpack._atomic import write_atomically
from tokpack.chess.board.results import RESULTS
from tokpack.chess.schemes.game_encoder import DecodedGame, EncodedGames, canonical_identity, framed, result_id, result_indices
from tokpack.chess.schemes.uci import BOS_ID, EOS_ID, PAD_ID, RESULT_IDS, SPECIAL_TOKENS, UNK_ID
from tokpack.errors import InputError
from tokpack.vocab.identity import VocabIdentity

if TYPE_CHECKING:
    import pyarrow as pa
    from tokenizers import Tokenizer

#: Every character spaceless UCI uses.
ALPHABET = "12345678abcdefghnbrq"
#: Framing tokens around a game's BPE ids: <bos>, result, <eos>.
FRAMING = 3


def spaceless(uci: str) -> str:
    """The text the BPE sees: the moves with their spaces removed.

    >>> spaceless("e2e4 e7e5")
    'e2e4e7e5'
    """
    return uci.replace(" ", "")


def split_moves(text: str) -> list[str]:
    """Cut spaceless UCI back into its moves.

    A move is four characters plus, for a promotion, one of ``q r b n``. Only ``b`` is
    ambiguous (it is also a file): it is a promotion exactly when the piece moving is a pawn
    reaching the last rank, which replaying the moves from the standard start tells. From the
    first illegal move on, the board is unknown and the rank rule decides instead (a move from
    the 7th rank to the 8th, or from the 2nd to the 1st, takes the ``b``).

    Raises:
        InputError: ``text`` does not cut into UCI moves.

    >>> split_moves("d2d3e7e6e1d2f8b4d2e3b4d2e3f3d2c1b2b4")[-2:]
    ['d2c1', 'b2b4']
    >>> split_moves("e2e5e7e8qa1a2")
    ['e2e5', 'e7e8q', 'a1a2']
    """
    import chess

    board: chess.Board | None = chess.Board()
    moves: list[str] = []
    at = 0
    while at < len(text):
        head = text[at : at + 4]
        if len(head) < 4 or head[0] not in "abcdefgh" or head[2] not in "abcdefgh" \
                or head[1] not in "12345678" or head[3] not in "12345678":
            raise InputError(f"{text[at:at + 8]!r} at character {at} is not a UCI move")
        letter = text[at + 4 : at + 5]
        if letter == "b":
            if board is not None:
                promotes = board.piece_type_at(chess.parse_square(head[:2])) == chess.PAWN and head[3] in "18"
            else:
                promotes = (head[1], head[3]) in (("7", "8"), ("2", "1"))
        else:
            promotes = letter in ("q", "r", "n")
        move = head + letter if promotes else head
        if board is not None:
            parsed = chess.Move.from_uci(move) if head[:2] != head[2:] else None
            if parsed is not None and board.is_legal(parsed):
                board.push(parsed)
            else:
                board = None
        moves.append(move)
        at += len(move)
    return moves


def train_bpe(games: Iterable[str], vocab_size: int, min_frequency: int = 2) -> BpeEncoder:
    """Learn a BPE of ``vocab_size`` ids (specials and alphabet included) over UCI games.

    ``games`` are space-separated UCI games (their spaces are removed here). The same games in
    the same order give the same merges.

    Raises:
        InputError: ``vocab_size`` too small to hold the specials and the alphabet.
    """
    from tokenizers import Tokenizer, models, trainers

    floor = len(SPECIAL_TOKENS) + len(set(ALPHABET))
    if vocab_size < floor:
        raise InputError(f"vocab_size must be at least {floor} (specials and alphabet), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS), initial_alphabet=sorted(set(ALPHABET)))
    tokenizer.train_from_iterator((spaceless(game) for game in games), trainer=trainer)
    return BpeEncoder(tokenizer)


def train_bpe_from_parquet(games: Path, vocab_size: int, n_games: int) -> BpeEncoder:
    """:func:`train_bpe` over the first ``n_games`` games of a games parquet, read in batches."""
    return train_bpe(_first_games(Path(games), n_games), vocab_size)


def _first_games(path: Path, n_games: int) -> Iterator[str]:
    import pyarrow.parquet as pq

    left = n_games
    with pq.ParquetFile(path, pre_buffer=False) as reader:
        for batch in reader.iter_batches(batch_size=8192, columns=["uci"]):
            yield from batch.column("uci").to_pylist()[:left]
            left -= batch.num_rows
            if left <= 0:
                return


class BpeEncoder:
    """A trained BPE as a :class:`~tokpack.chess.schemes.game_encoder.GameEncoder`.

    Raises:
        InputError: (building it) the tokenizer is not a BPE, or a special token of the uci
            scheme is missing or has another id there.
    """

    scheme = "bpe"
    record_kind = "chess"  # its kind in tokpack.engines.kinds.KINDS
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, tokenizer: Tokenizer) -> None:
        model = json.loads(tokenizer.to_str())["model"]
        if model.get("type") != "BPE":
            raise InputError(f"expected a BPE tokenizer, got {model.get('type')!r}")
        for expected, token in enumerate(SPECIAL_TOKENS):
            found = tokenizer.token_to_id(token)
            if found != expected:
                raise InputError(f"special token {token!r} has id {found} in the BPE but {expected} in the uci scheme")
        self.tokenizer = tokenizer
        self._merges = [m.split(" ") if isinstance(m, str) else list(m) for m in model.get("merges", [])]

    @classmethod
    def load(cls, path: Path) -> BpeEncoder:
        """Read a ``tokenizer.json`` written by :meth:`save`.

        Raises:
            InputError: naming the file, when it is missing, unreadable or not a valid chess BPE.
        """
        from tokenizers import Tokenizer

        return cls._built(lambda: Tokenizer.from_file(str(path)), path)

    @classmethod
    def from_json(cls, text: str, *, where: str | Path) -> BpeEncoder:
        """The BPE of a ``tokenizer.json`` text (``where`` names it in errors).

        Raises:
            InputError: not a valid chess BPE.
        """
        from tokenizers import Tokenizer

        return cls._built(lambda: Tokenizer.from_str(text), where)

    @classmethod
    def _built(cls, make: Callable[[], Tokenizer], where: str | Path) -> BpeEncoder:
        try:
            return cls(make())
        except Exception as error:  # tokenizers raises its own exception types
            raise InputError(f"not a chess BPE ({str(error).splitlines()[0] if str(error) else type(error).__name__})", where=where) from None

    def save(self, path: Path) -> None:
        """Write the tokenizer as ``tokenizer.json`` text, atomically (a temporary sibling renamed)."""
        write_atomically(Path(path), self.tokenizer.to_str(pretty=False) + "\n")

    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    @cached_property
    def tokens(self) -> list[str]:
        """Every token's text, by id."""
        return [str(self.tokenizer.id_to_token(i)) for i in range(self.vocab_size())]

    @cached_property
    def identity(self) -> VocabIdentity:
        rules: dict[str, Any] = {"game": "<bos> bpe(spaceless uci) result <eos>", "merges": self._merges, "ratings": "not encoded"}
        return canonical_identity(self.scheme, self.tokens, rules)

    def encode_game(self, uci: str, white_elo: int | None, black_elo: int | None, result: str, max_len: int) -> list[int]:
        """``<bos>``, the BPE ids of the spaceless moves, the result, ``<eos>``; cut to ``max_len``.

        Raises:
            InputError: ``result`` is not one of 1-0, 0-1, 1/2-1/2, *.
        """
        outcome = result_id(result)
        body = self.tokenizer.encode(spaceless(uci), add_special_tokens=False).ids
        return [BOS_ID, *body, outcome, EOS_ID][:max_len]

    def encode_batch(self, games: pa.Table | pa.RecordBatch) -> EncodedGames:
        """Every game of ``games`` (columns uci and result; ratings ignored).

        ``unknown_moves`` counts ``<unk>`` ids (characters outside the alphabet).

        Raises:
            GameError: naming the row of an unknown result.
        """
        import pyarrow.compute as pc

        results = np.asarray([RESULT_IDS[r] for r in RESULTS], dtype=np.uint32)[result_indices(games.column("result"), RESULTS)]
        texts = pc.replace_substring(games.column("uci"), " ", "").to_pylist()
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        bodies = [np.asarray(encoding.ids, dtype=np.uint32) for encoding in encode(texts, add_special_tokens=False)]
        counts = np.fromiter((len(b) for b in bodies), dtype=np.int64, count=len(bodies))
        body = np.concatenate(bodies) if bodies else np.zeros(0, np.uint32)
        encoded = framed(body, counts, [BOS_ID], [results, EOS_ID], dtype=np.uint32)
        return EncodedGames(encoded.ids, encoded.lengths, unknown_moves=int(np.count_nonzero(body == UNK_ID)))

    def decode(self, ids: list[int] | np.ndarray) -> DecodedGame:
        """The moves (boundaries restored by :func:`split_moves`) and result of one framed game.

        Raises:
            InputError: not ``<bos> ... result <eos>``, or a body id that is a special token.
        """
        ids = [int(i) for i in ids]
        if len(ids) < FRAMING or ids[0] != BOS_ID or ids[-1] != EOS_ID or self.tokens[ids[-2]] not in RESULT_IDS:
            raise InputError("not a whole game: expected <bos> ... result <eos>")
        if any(i < len(SPECIAL_TOKENS) for i in ids[1:-2]):
            raise InputError("a special token inside the moves")
        return DecodedGame(" ".join(split_moves("".join(self.tokens[i] for i in ids[1:-2]))), self.tokens[ids[-2]])

    def longest_tokens(self, n: int) -> list[tuple[str, int]]:
        """The ``n`` longest learnt tokens (longest first, then by id) with their length in characters."""
        learnt = [(token, len(token)) for token in self.tokens[len(SPECIAL_TOKENS):]]
        return sorted(learnt, key=lambda pair: -pair[1])[:n]
