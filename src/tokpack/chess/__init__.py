"""Chess games as a corpus: three tokenization schemes, PGN to parquet, packs, statistics, parity.

>>> from tokpack.chess import make_encoder
>>> make_encoder("uci").encode_game("e2e4 e7e5", 2600, 2550, "1-0", max_len=200)[:3]
[1, 48, 47]
"""

from tokpack.chess.bpe import BpeEncoder, split_moves, train_bpe, train_bpe_from_parquet
from tokpack.chess.encoders import (
    DecodedGame,
    EloBin,
    EncodedGames,
    GameEncoder,
    GameError,
)
from tokpack.chess.jobs.config import ChessPipelineConfig, load_config
from tokpack.chess.jobs.fixture import build_parity, read_parity, write_parity
from tokpack.chess.jobs.pack import pack_games
from tokpack.chess.jobs.stats import ChessStats, compute_stats
from tokpack.chess.pgn import (
    ConversionReport,
    convert_pgn,
    month_parquet,
    read_games,
    read_games_strictly,
)
from tokpack.chess.san import SanEncoder, san_moves
from tokpack.chess.schemes import SCHEMES, make_encoder
from tokpack.chess.uci import UciEncoder

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
