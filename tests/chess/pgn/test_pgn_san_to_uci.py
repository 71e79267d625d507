"""The compiled SAN resolver and word scanner against python-chess, move by move.

Random legal games biased towards the moves a resolver gets wrong (castling both ways, en
passant, promotions and under-promotions, mates, disambiguation, pins) must resolve to
python-chess's own UCI; the same games with one move replaced by a random SAN token must resolve
only where python-chess's ``parse_san`` accepts the token, to the same move; and the compiled word
scanner must give every word the code python-chess's movetext expression gives it.
"""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpack.chess.pgn._san_to_uci import ASK, SEPARATOR, code_words, resolve_san
from tokpack.chess.pgn._san_to_uci_compiled import scan_words
from tokpack.chess.pgn.read import new_codes

from cached import cached_random_games

_SQUARE = [chess.square_name(s) for s in range(64)]


def resolve(games: list[list[str]]) -> list[list[str] | None]:
    """Our UCI of each game's SAN words, or ``None`` where the game is left to python-chess."""
    words = code_words(" \x00 ".join(" ".join(g) for g in games), new_codes())
    game_of_word = np.cumsum(words == SEPARATOR)
    moves = words >= 0
    assert not (words == ASK).any()
    counts = np.bincount(game_of_word[moves], minlength=len(games))
    start, end, promo, resolved = resolve_san(words[moves], counts)
    out: list[list[str] | None] = []
    first = 0
    for g, n in enumerate(counts.tolist()):
        uci = [_SQUARE[a] + _SQUARE[b] + " pnbrqk"[c].strip()
               for a, b, c in zip(start[first:first + n].tolist(), end[first:first + n].tolist(), promo[first:first + n].tolist(), strict=True)]
        out.append(uci if resolved[g] else None)
        first += n
    return out


Games = list[tuple[list[str], list[str]]]


@pytest.fixture(scope="module")
def games(pytestconfig: pytest.Config) -> Games:
    """1,500 random legal games, a tenth of them mating when they can: python-chess plays them
    slowly, so the tests below share them (kept across runs) and each varies them its own way."""
    return cached_random_games(pytestconfig, 1500, seed=15, mate_every=10)


def test_random_legal_games_resolve_as_python_chess_plays_them(games: Games) -> None:
    assert resolve([s for s, _ in games]) == [u for _, u in games]
    seen = {"O-O": 0, "O-O-O": 0, "=Q": 0, "=N": 0, "=R": 0, "=B": 0, "#": 0, "x": 0}
    for sans, _ in games:
        for san in sans:
            for key in seen:
                seen[key] += key in san if key.startswith(("=", "#", "x")) else san.rstrip("+#") == key
    en_passant = sum(_is_en_passant(u) for _, u in games)
    disambiguated = sum(1 for sans, _ in games for san in sans if san[0] in "NBRQ" and len(san.rstrip("+#").replace("x", "")) > 3)
    assert min(seen.values()) > 0 and en_passant > 0 and disambiguated > 0, (seen, en_passant, disambiguated)


def _is_en_passant(ucis: list[str]) -> int:
    board, count = chess.Board(), 0
    for uci in ucis:
        move = chess.Move.from_uci(uci)
        count += board.is_en_passant(move)
        board.push(move)
    return count


def test_a_pinned_piece_does_not_make_a_move_ambiguous() -> None:
    # After 1.d4 e5 2.Nf3 Bb4+ 3.Nbd2? no: 3.c3 ... the knight on c3 is pinned by the bishop on b4,
    # so "Ne2" names the knight on g1; python-chess writes it without disambiguation.
    sans = "e4 e5 Nc3 Bb4 d3 d6 Ne2".split()
    board = chess.Board()
    ucis = [board.push_san(s).uci() for s in sans]
    assert resolve([sans]) == [ucis]


def _spelled(board: chess.Board, move: chess.Move) -> str:
    """A move in SAN with its origin spelled out (``Nb1xc3``, ``exd5``, ``e8=Q``), legal or not."""
    piece = board.piece_type_at(move.from_square)
    taking = board.piece_at(move.to_square) is not None or board.is_en_passant(move)
    promotion = "=" + chess.piece_symbol(move.promotion).upper() if move.promotion else ""
    if piece == chess.PAWN:
        origin = chess.square_name(move.from_square)[0] + "x" if taking else ""
        return origin + chess.square_name(move.to_square) + promotion
    return (chess.piece_symbol(piece).upper() + chess.square_name(move.from_square) + "x" * taking  # type: ignore[arg-type]
            + chess.square_name(move.to_square))


def test_moves_that_leave_the_king_attacked_are_refused(games: Games) -> None:
    """At every ply of random games, each move that python-chess generates but refuses (a pinned
    piece leaving its line, a move ignoring a check, an en passant exposing the king) leaves the
    game to python-chess; the game's legal moves at that ply, spelled the same way, resolve."""
    rng = random.Random(18)
    tried: list[list[str]] = []
    truth: list[list[str] | None] = []
    in_check = 0
    for sans, ucis in games[:150]:
        board = chess.Board()
        for ply, uci in enumerate(ucis):
            legal = list(board.legal_moves)
            legal_set = set(legal)
            illegal = [m for m in board.pseudo_legal_moves if m not in legal_set and not board.is_castling(m)]
            for move in illegal + rng.sample(legal, min(2, len(legal))):
                word = _spelled(board, move)
                tried.append(sans[:ply] + [word])
                # python-chess's reading of the whole game: the prefix is legal, so only the last
                # word can fail (parse_san is what push_san does before it pushes).
                truth.append(_parsed_on(board, word, ucis[:ply]))
                in_check += board.is_check() and move in illegal
            board.push(chess.Move.from_uci(uci))
    assert sum(t is None for t in truth) > 2_000 and in_check > 200, (sum(t is None for t in truth), in_check)
    assert resolve(tried) == truth


def _parsed_on(board: chess.Board, san: str, before: list[str]) -> list[str] | None:
    try:
        return [*before, board.parse_san(san).uci()]
    except ValueError:
        return None


def _python_chess(sans: list[str]) -> list[str] | None:
    board, ucis = chess.Board(), []
    try:
        for san in sans:
            ucis.append(board.push_san(san).uci())
    except ValueError:
        return None
    return ucis


def test_broken_moves_resolve_only_where_python_chess_accepts_them(games: Games) -> None:
    rng = random.Random(16)
    tokens = ["Kg1", "Kc8", "O-O", "O-O-O", "exd6", "e8=K", "e8=Q", "Nbd2", "N1f3", "Qh4", "Bxf7", "a1=Q",
              "Rad1", "Rfe1", "Ke2", "e4", "d5", "Nf3", "Nc6", "Bb5", "h8=N", "gxh8=R", "Kxe8", "b4", "axb3", "e2e4"]
    agreed = refused = 0
    for i, (sans, _) in enumerate(games[:800]):
        at = rng.randrange(len(sans))
        sans = sans[:at] + [rng.choice(tokens)]  # the game ends at the replaced move
        truth, (ours,) = _python_chess(sans), resolve([sans])
        if truth is None:
            assert ours is None, (i, sans)
            refused += 1
        else:
            assert ours is None or ours == truth, (i, sans)  # None: left to python-chess
            agreed += ours == truth
    assert agreed > 30 and refused > 300, (agreed, refused)


def test_sloppy_spellings_python_chess_accepts_resolve_the_same(games: Games) -> None:
    """Redundant disambiguation, a missing ``x`` or ``=``, castling with zeros: python-chess reads them all."""
    rng = random.Random(17)
    changed = 0
    for sans, ucis in games[:500]:
        board = chess.Board()
        sloppy = []
        for san, uci in zip(sans, ucis, strict=True):
            move = chess.Move.from_uci(uci)
            piece = board.piece_at(move.from_square)
            word = san
            roll = rng.random()
            if roll < 0.2 and piece is not None and piece.piece_type != chess.PAWN and not board.is_castling(move):
                word = (piece.symbol().upper() + chess.square_name(move.from_square) + "x" * ("x" in san)
                        + chess.square_name(move.to_square) + san[len(san.rstrip("+#")):])
            elif roll < 0.4:
                word = san.replace("x", "").replace("=", "").replace("O", "0")
            changed += word != san
            sloppy.append(word)
            board.push(move)
        assert _python_chess(sloppy) == ucis
        assert resolve([sloppy]) == [ucis], sloppy
    assert changed > 1000


_PART = st.sampled_from
_SANLIKE = st.builds(lambda *parts: "".join(parts), _PART(["", "", "1.", "12...", "0000.", "1234.", "9", "$"]),
                     _PART(["", "", "N", "B", "R", "Q", "K", "P", "O-O", "0-0", "O"]), _PART(["", "", "a", "h", "x"]),
                     _PART(["", "", "1", "8", "0", "9"]), _PART(["", "", "x", "-", "@"]), _PART(["e4", "a8", "h1", "i9", "e", ""]),
                     _PART(["", "", "=Q", "=n", "b", "K", "=", "=P"]), _PART(["", "", "+", "#", "!?", "+!", "?", "e4"]))
_WORDS = st.one_of(_SANLIKE, st.text(alphabet="NBRQKOPnbrqkabcdefgh0123456789x-=+#!?.$*/@Z", min_size=1, max_size=9))


@settings(max_examples=400, deadline=None)
@given(st.lists(_WORDS.filter(bool), min_size=1, max_size=30))
def test_scanned_words_have_the_codes_python_chess_tokens_give(words: list[str]) -> None:
    text = " ".join(words)
    buffer = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    codes, starts, ends = (np.empty(len(buffer) // 2 + 1, dtype=np.int64) for _ in range(3))
    n = scan_words(buffer, codes, starts, ends)
    assert n == len(words)
    reference = new_codes()
    for word, code in zip(words, codes[:n].tolist(), strict=True):
        if code != ASK:
            assert code == reference[word], word


def test_common_words_are_scanned_not_asked() -> None:
    words = "1. e4 e5 2.Nf3 Nc6 3...Bb5 $1 a6!? 12.O-O O-O-O+ exd8=Q# e8=N Nbd7 R1e2 Qh4xe1+ 1-0 0-1 1/2-1/2 * !! +".split()
    buffer = np.frombuffer(" ".join(words).encode("ascii"), dtype=np.uint8)
    codes, starts, ends = (np.empty(len(buffer), dtype=np.int64) for _ in range(3))
    n = scan_words(buffer, codes, starts, ends)
    reference = new_codes()
    assert codes[:n].tolist() == [reference[w] for w in words]
