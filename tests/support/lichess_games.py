"""Lichess-style PGN made by python-chess from seeded random legal games (tests and bench use it).

Games carry Lichess's tags (UTCDate, TimeControl, Termination, ECO, ...) and ``{ [%eval ..]
[%clk ..] }`` comments after moves; some also have NAGs, ``!?`` suffixes, variations (nested too),
long lines wrapped, move numbers with ``...``. Play is biased towards the moves a reader gets
wrong: promotions (under-promotions included), castling both ways, en passant, and mate in one
when there is one. Returns the text and the UCI main line of each game (the truth);
:func:`random_game` gives one such game's bare SAN and UCI, :func:`sharp_game` a game biased to
captures, checks and promotions instead.
"""

from __future__ import annotations

import random

import chess

SPEEDS = ("60+0", "180+0", "180+2", "300+3", "600+0", "900+10", "1800+0", "-")
TERMINATIONS = ("Normal", "Normal", "Normal", "Time forfeit", "Abandoned")


def _pick(board: chess.Board, rng: random.Random, mates: bool) -> chess.Move:
    legal = list(board.legal_moves)
    if mates:
        for move in legal:
            if board.gives_check(move):
                board.push(move)
                mate = board.is_checkmate()
                board.pop()
                if mate:
                    return move
    special = [m for m in legal if m.promotion or board.is_castling(m) or board.is_en_passant(m)]
    if special and rng.random() < 0.9:
        return rng.choice(special)
    pawns = [m for m in legal if board.piece_type_at(m.from_square) == chess.PAWN]
    if pawns and rng.random() < 0.35:
        return rng.choice(pawns)
    return rng.choice(legal)


def sharp_game(rng: random.Random, max_plies: int = 250) -> tuple[str, str]:
    """The UCI moves and result of a random legal game, half its moves a capture, a check or a
    promotion when there is one: pins, several queens, under-promotions, en passant, mates,
    disambiguation by file, rank and both."""
    board, moves = chess.Board(), []
    while not board.is_game_over() and len(moves) < max_plies:
        legal = list(board.legal_moves)
        sharp = [m for m in legal if m.promotion or board.is_capture(m) or board.gives_check(m)]
        move = rng.choice(sharp if sharp and rng.random() < 0.5 else legal)
        moves.append(move.uci())
        board.push(move)
    return " ".join(moves), board.result()


def random_game(rng: random.Random, mates: bool) -> tuple[list[str], list[str]]:
    """SAN and UCI of one random legal game, no comments (python-chess plays and spells it)."""
    board, sans, ucis = chess.Board(), [], []
    for _ in range(min(int(rng.expovariate(1 / 60)) + 1, 300)):
        if board.is_game_over():
            break
        move = _pick(board, rng, mates)
        sans.append(board.san(move))
        ucis.append(move.uci())
        board.push(move)
    return sans, ucis


def _comment(rng: random.Random, clock: int) -> str:
    parts = []
    if rng.random() < 0.5:
        parts.append(f"[%eval {rng.uniform(-5, 5):.2f}]" if rng.random() < 0.9 else f"[%eval #{rng.randint(-9, 9)}]")
    parts.append(f"[%clk {clock // 3600}:{clock // 60 % 60:02d}:{clock % 60:02d}]")
    return "{ " + " ".join(parts) + " }"


def lichess_game(rng: random.Random, index: int) -> tuple[str, str]:
    """One game's PGN text and its UCI main line."""
    board = chess.Board()
    length = min(int(rng.expovariate(1 / 35)) + 1, 250)
    mates = index % 40 == 0  # looking for mate in one costs a gives_check per move
    words: list[str] = []
    clocks = [rng.choice((60, 180, 300, 600)) for _ in range(2)]
    fancy = rng.random() < 0.3  # NAGs, variations, suffixes
    for ply in range(length):
        if board.is_game_over():
            break
        move = _pick(board, rng, mates)
        san = board.san(move)
        number = f"{ply // 2 + 1}." if ply % 2 == 0 else f"{ply // 2 + 1}..."
        suffix = rng.choice(("!", "?", "!?", "?!", "!!", "??")) if fancy and rng.random() < 0.1 else ""
        words.append(f"{number} {san}{suffix}" if ply % 2 == 0 or rng.random() < 0.5 else f"{san}{suffix}")
        if fancy and rng.random() < 0.1:
            words.append(f"${rng.randint(1, 20)}")
        clocks[ply % 2] = max(0, clocks[ply % 2] - rng.randint(0, 5))
        if rng.random() < 0.85:
            words.append(_comment(rng, clocks[ply % 2]))
        if fancy and rng.random() < 0.08:  # a variation: other moves from the same position
            words.append(_variation(board, rng, depth=0))
        board.push(move)
    result = board.result(claim_draw=False)
    if result == "*":
        result = rng.choice(("1-0", "0-1", "1/2-1/2", "*"))
    words.append(result)
    movetext = " ".join(words)
    if rng.random() < 0.2:  # wrapped lines, as many exporters write them
        movetext = _wrap(movetext)
    date = f"2016.{rng.randint(1, 12):02d}.{rng.randint(1, 28):02d}"
    tags = {
        "Event": rng.choice(("Rated Blitz game", "Rated Bullet game", "Casual Rapid game", "Rated Classical game")),
        "Site": f"https://lichess.org/{index:08d}",
        "Date": date.replace("2016", "????") if rng.random() < 0.05 else date,
        "Round": "-", "White": f"player{rng.randint(1, 999)}", "Black": f"player{rng.randint(1, 999)}",
        "Result": result, "UTCDate": date, "UTCTime": "12:00:00",
        "WhiteElo": str(rng.randint(800, 2900)), "BlackElo": str(rng.randint(800, 2900)),
        "WhiteRatingDiff": "+5", "BlackRatingDiff": "-5", "ECO": f"C{rng.randint(0, 99):02d}",
        "Opening": "Some Opening: Variation", "TimeControl": rng.choice(SPEEDS),
        "Termination": rng.choice(TERMINATIONS),
    }
    header = "".join(f'[{k} "{v}"]\n' for k, v in tags.items())
    return header + "\n" + movetext + "\n\n", " ".join(m.uci() for m in board.move_stack)


def _variation(board: chess.Board, rng: random.Random, depth: int) -> str:
    copy = board.copy(stack=False)
    words = []
    for _ in range(rng.randint(1, 4)):
        legal = list(copy.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        words.append(copy.san(move))
        if rng.random() < 0.3:
            words.append("{ a comment (with parentheses) }")
        if depth < 2 and rng.random() < 0.15:
            words.append(_variation(copy, rng, depth + 1))
        copy.push(move)
    return "( " + " ".join(words) + " )"


def _wrap(text: str, width: int = 79) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def lichess_pgn(n_games: int, seed: int = 0) -> tuple[str, list[str]]:
    """``n_games`` games as one PGN text, and each game's UCI main line."""
    rng = random.Random(seed)
    texts, truth = [], []
    for index in range(n_games):
        text, uci = lichess_game(rng, index)
        texts.append(text)
        truth.append(uci)
    return "".join(texts), truth
