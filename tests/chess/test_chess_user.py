"""What a new user of ``tokpack chess`` meets at the edges: wrong files, errors that say the fix,
what ``tokenize --pack`` reports, and a month exported for nanoGPT."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zstandard
from typer.testing import CliRunner

from tokpack.cli import app
from tokpack.errors import InputError
from tokpack.serve import Windows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PGN = FIXTURES / "chess_games.pgn"
runner = CliRunner()
HTML = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body>Not Found</body></html>\n"


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())  # rich may wrap a long line


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The fixture's games converted, and packed with the uci scheme: (root, config, output of the pack)."""
    root = tmp_path_factory.mktemp("chess_user")
    code, output = _run("chess", "convert", str(PGN), "--out", str(root / "games"))
    assert code == 0, output
    months = json.loads((root / "games" / "convert-report.json").read_text(encoding="utf-8"))["months"]
    val = sorted(months, key=lambda m: (-months[m], m))[0]
    config = root / "pipeline.toml"
    train_months = ", ".join(f'"{m}"' for m in sorted(months) if m != val)
    config.write_text(f'games_dir = "games"\nout_dir = "tokens"\ntrain_months = [{train_months}]\nval_month = "{val}"\n',
                      encoding="utf-8")
    code, output = _run("chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config))
    assert code == 0, output
    return root, config, output


@pytest.mark.parametrize("name", ["lichess_db_standard_rated_2099-01.pgn.zst", "x.pgn", "empty.pgn"])
def test_a_file_that_is_not_pgn_is_refused(tmp_path: Path, name: str) -> None:
    data = b"" if name == "empty.pgn" else HTML
    path = tmp_path / name
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if name.endswith(".zst") else data)
    code, output = _run("chess", "convert", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and "Traceback" not in output, output
    assert name in output
    assert ("is empty" if name == "empty.pgn" else "starts with '<!DOCTYPE html>': not PGN") in output
    assert not (tmp_path / "out").exists()


def test_real_games_all_filtered_out_still_convert(tmp_path: Path) -> None:
    code, output = _run("chess", "convert", str(PGN), "--out", str(tmp_path / "out"), "--min-elo", "4000")
    assert code == 0, output
    report = json.loads((tmp_path / "out" / "convert-report.json").read_text(encoding="utf-8"))
    assert report["games_written"] == 0 and report["filtered"]["min_elo"] == report["games_read"] > 0


def test_a_bad_time_control_is_refused(tmp_path: Path) -> None:
    code, output = _run("chess", "convert", str(PGN), "--out", str(tmp_path / "out"), "--time-control", "180+2,abc")
    assert code == 2 and "--time-control" in output and "'abc'" in output, output
    assert not (tmp_path / "out").exists()
    code, output = _run("chess", "convert", str(PGN), "--out", str(tmp_path / "ok"),
                        "--time-control", "180+2,300,40/7200:3600,-")
    assert code == 0, output


def test_a_damaged_zstd_names_the_frame_and_where_reading_failed(tmp_path: Path) -> None:
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(PGN.read_bytes()))
    flipped = len(data) // 2
    data[flipped] ^= 0xFF
    path = tmp_path / "flip.pgn.zst"
    path.write_bytes(bytes(data))
    code, output = _run("chess", "convert", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and "flip.pgn.zst" in output, output
    assert "the frame starting at byte 0" in output and "byte 0:" not in output
    reported = int(output.split("flip.pgn.zst: byte ")[1].split(":")[0].replace(",", ""))
    assert reported >= flipped


def test_existing_outputs_and_a_missing_config_say_the_fix(packed: tuple[Path, Path, str], tmp_path: Path) -> None:
    root, config, _ = packed
    code, output = _run("chess", "tokenize", "--scheme", "uci", "--pack", "--config", str(config))
    assert code == 2 and "already exists" in output and "remove that folder" in output and "out_dir" in output
    code, output = _run("chess", "convert", str(PGN), "--out", str(root / "games"))
    assert code == 2 and "already exists" in output and "pick another --out" in output
    code, output = _run("chess", "tokenize", "--scheme", "uci", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "no such config file" in output and "--config" in output


def test_tokenize_pack_says_how_many_shards_and_where(packed: tuple[Path, Path, str]) -> None:
    root, _, output = packed
    for folder in ("train", "val"):
        assert f"1 shard in {root / 'tokens' / 'uci' / folder}" in output


def test_a_wrong_month_lists_a_few_and_the_count(packed: tuple[Path, Path, str]) -> None:
    root, _, _ = packed
    train = root / "tokens" / "uci" / "train"
    ranges = json.loads((train / "dataset.json").read_text(encoding="utf-8"))["ranges"]
    assert len(ranges) > 3  # more than the message lists
    with pytest.raises(InputError) as caught:
        Windows(train, block=200, split="2099-01")
    message = str(caught.value)
    assert f"it has {len(ranges)}:" in message and f"tokpack inspect {train}" in message
    listed = message.split(": ", 1)[1].split("(list them")[0]  # after the path, before the hint
    assert sum(name in listed for name in ranges) == 3


def test_inspect_a_month_exported_for_nanogpt(packed: tuple[Path, Path, str]) -> None:
    root, _, _ = packed
    train = root / "tokens" / "uci" / "train"
    month = sorted(r for r in json.loads((train / "dataset.json").read_text(encoding="utf-8"))["ranges"] if r != "train")[0]
    out = root / f"nanogpt-{month}"
    code, output = _run("export", str(train), str(out), "--format", "nanogpt", "--range", month)
    assert code == 0 and (out / f"{month}.bin").is_file(), output
    code, output = _run("inspect", str(out))
    assert code == 0 and "ok:" in output, output
    ids = np.memmap(out / f"{month}.bin", dtype=np.uint16, mode="r")
    assert int(ids[-1]) == 0 and int(ids[-2]) == 2  # each game's <eos>, then the <pad> separator (see the README)
