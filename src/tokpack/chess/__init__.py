"""Chess games as a corpus: the board, PGN read and converted to parquet, five tokenization schemes, packs, statistics, parity.

>>> from tokpack.chess import make_encoder
>>> make_encoder("uci").encode_game("e2e4 e7e5", 2600, 2550, "1-0", max_len=200)[:3]
[1, 48, 47]
"""

from tokpack.chess.jobs.config import ChessPipelineConfig, load_config
from tokpack.chess.jobs.fixture import build_parity, read_parity, write_parity
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.jobs.stats import ChessStats, compute_stats
from tokpack.chess.pgn.convert import ConversionReport, convert_pgn, month_parquet
from tokpack.chess.pgn.games import read_games, read_games_strictly
from tokpack.chess.schemes import SCHEMES, make_encoder
from tokpack.chess.schemes.game_encoder import (
    DecodedGame,
    EloBin,
    EncodedGames,
    GameEncoder,
    GameError,
)
from tokpack.chess.schemes.san import SanEncoder, san_moves
from tokpack.chess.schemes.uci import UciEncoder
from tokpack.chess.schemes.uci_bpe import BpeEncoder, split_moves, train_bpe, train_bpe_from_parquet

__all__ = [
    "SCHEMES",
    "BpeEncoder",
    "ChessPipelineConfig",
    "ChessStats",
    "ConversionReport",
    "DecodedGame",
    "EloBin",
    "EncodedGames",
    "GameEncoder",
    "GameError",
    "SanEncoder",
    "UciEncoder",
    "build_parity",
    "compute_stats",
    "convert_pgn",
    "load_config",
    "make_encoder",
    "month_parquet",
    "pack_games",
    "read_games",
    "read_games_strictly",
    "read_parity",
    "san_moves",
    "split_moves",
    "train_bpe",
    "train_bpe_from_parquet",
    "write_parity",
]
