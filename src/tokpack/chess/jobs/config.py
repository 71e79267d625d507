"""The chess pipeline's TOML configuration, as a strict pydantic model.

Example (paths are relative to the file's folder)::

    games_dir = "games"          # the output of `tokpack chess convert`
    out_dir = "tokens"           # packs go to out_dir/<scheme>/{train,val}
    train_month = "2016-01"      # YYYY-MM; MM is 00 for games whose month is unknown
    val_month = "2016-02"
    # or several months (packed as one sharded dataset; each month stays a named range):
    #   train_months = ["2016-01", "2016-02"]   or   train_months = "all"
    #   val_months = ["2016-03"]                or   val_fraction = 0.05 (the latest months)
    bpe_vocab_size = 4096        # ids of the bpe scheme, specials and alphabet included
    bpe_allow_smaller_vocab = false  # accept fewer ids when the games cannot reach bpe_vocab_size
    bpe_train_games = 100000     # the BPE learns from the first games of the training month
    stats_games = 20000          # statistics use the first games of the same table
    max_len = 200                # the context the statistics measure against
    fixture_pgn = "fixture.pgn"  # games of the parity fixture (optional)
    workers = 1                  # processes that pack shards (the bytes do not depend on it)
    engine = "local"             # who runs the shards: local, ray, or array (write the jobs only)
    ray_address = "auto"         # an existing Ray cluster to join (engine = "ray"; optional)
    shard_mb = 64                # a shard takes whole games until their moves reach this many MB as UCI text
    shard_games = 1000000        # ... or until it holds this many games (optional)
    position_sample = 1.0        # the position scheme: the share of each game's positions kept
    position_seed = 0            # ... and which ones (the same seed, the same positions)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from tokpack._schema import Record, first_problem
from tokpack.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MONTH = r"^\d{4}-\d{2}$"
#: Where :func:`load_config` looks when no file is named.
DEFAULT_CONFIG = Path("tokpack-chess.toml")
#: The smallest config, as a missing file's message shows it (one line).
EXAMPLE = ('games_dir = "games"  out_dir = "tokens"  train_month = "2016-01"  val_month = "2016-02" '
           "(one setting a line; see docs/chess.md)")


class ChessPipelineConfig(Record):
    """Inputs, outputs and settings of ``tokpack chess tokenize``."""

    schema_: Literal["tokpack.chess.pipeline.v1"] = Field(default="tokpack.chess.pipeline.v1", alias="schema")
    games_dir: Path
    out_dir: Path
    train_month: str | None = Field(default=None, pattern=MONTH)
    val_month: str | None = Field(default=None, pattern=MONTH)
    train_months: list[Annotated[str, Field(pattern=MONTH)]] | Literal["all"] | None = None
    val_months: list[Annotated[str, Field(pattern=MONTH)]] | None = None
    val_fraction: float | None = Field(default=None, gt=0, lt=1)
    bpe_vocab_size: int = Field(default=4096, ge=28, le=65_536)
    bpe_allow_smaller_vocab: bool = False
    bpe_train_games: int = Field(default=100_000, ge=1)
    stats_games: int = Field(default=20_000, ge=1)
    max_len: int = Field(default=200, ge=1)
    fixture_pgn: Path | None = None
    workers: int = Field(default=1, ge=1, le=256)
    engine: Literal["local", "ray", "array"] = "local"
    ray_address: str | None = None
    # Finite, and at most an exabyte: the size in bytes must fit the 64-bit sums shards are cut by.
    shard_mb: float = Field(default=64, gt=0, le=1e12, allow_inf_nan=False)
    shard_games: int | None = Field(default=None, ge=1)
    position_sample: float = Field(default=1.0, gt=0, le=1)
    position_seed: int = Field(default=0, ge=0, lt=2**63)

    @model_validator(mode="after")
    def _one_way_each(self) -> ChessPipelineConfig:
        if (self.train_month is None) == (self.train_months is None):
            raise ValueError("give exactly one of train_month and train_months")
        if sum(x is not None for x in (self.val_month, self.val_months, self.val_fraction)) != 1:
            raise ValueError("give exactly one of val_month, val_months and val_fraction")
        return self

    @property
    def shard_bytes(self) -> int:
        """``shard_mb`` in bytes (a megabyte is 10^6 bytes)."""
        return max(1, round(self.shard_mb * 1_000_000))

    @property
    def bpe_file(self) -> Path:
        """Where the bpe scheme's tokenizer lives (beside its packs)."""
        return self.out_dir / "bpe" / "tokenizer.json"


def load_config(path: Path | None = None) -> ChessPipelineConfig:
    """Read a TOML config; relative paths are taken from the file's folder.

    Raises:
        InputError: naming the file: missing, not TOML, or a field that is missing or invalid.
    """
    path = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such config file", where=path, fix=f"write one, e.g. {EXAMPLE}, or name yours with "
                         "config=FILE") from None
    except OSError as error:  # a folder, no permission
        raise InputError(f"cannot read the config file ({error.strerror or error})", where=path) from None
    except (tomllib.TOMLDecodeError, ValueError) as error:  # ValueError: bad UTF-8, a 5,000-digit number
        raise InputError(f"not TOML ({str(error).split(';')[0]})", where=path) from None
    base = path.resolve().parent
    for key in ("games_dir", "out_dir", "fixture_pgn"):
        if isinstance(data.get(key), str):
            data[key] = base / data[key]
    try:
        return ChessPipelineConfig.model_validate(data)
    except ValidationError as error:
        raise InputError(first_problem(error), where=path) from None
