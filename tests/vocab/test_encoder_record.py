"""One ``encoder.json`` for text and chess: every kind rebuilds to the same encoder, edits are caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokpack.chess.schemes import make_encoder
from tokpack.chess.schemes.uci_bpe import BpeEncoder
from tokpack.engines.encoders import EncoderRecord, describe, read_encoder, rebuild, write_encoder
from tokpack.errors import InputError, IntegrityError
from tokpack.vocab.bytelevel import BpeTokenizer

REPO = Path(__file__).resolve().parents[2]
POLISH_8192 = REPO / "artifacts" / "polish-8192" / "vocabulary.json"
CHESS_BPE = REPO / "tests" / "fixtures" / "chess_bpe.json"
TEXT = "Zażółć gęślą jaźń, 2024 r. — <|endoftext|> and 🙂"
GAME = "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6 e1g1"


def encoders() -> list[object]:
    return [BpeTokenizer.load_saved(POLISH_8192), make_encoder("uci"), make_encoder("san"),
            make_encoder("bpe", BpeEncoder.load(CHESS_BPE))]


@pytest.mark.parametrize("index", range(4), ids=["text", "uci", "san", "chess-bpe"])
def test_every_kind_rebuilds_from_its_written_record(tmp_path: Path, index: int) -> None:
    encoder = encoders()[index]
    write_encoder(encoder, tmp_path / "encoder.json")  # type: ignore[arg-type]
    record = json.loads((tmp_path / "encoder.json").read_text(encoding="utf-8"))
    assert record["schema"] == "tokpack.encoder.v1" and record["kind"] == ("text" if index == 0 else "chess")
    rebuilt = read_encoder(tmp_path / "encoder.json", encoder.identity)  # type: ignore[attr-defined]
    assert type(rebuilt) is type(encoder) and rebuilt.identity == encoder.identity  # type: ignore[attr-defined]
    if isinstance(encoder, BpeTokenizer):
        assert rebuilt.encode(TEXT) == encoder.encode(TEXT) and rebuilt.special_tokens == encoder.special_tokens
    else:
        assert rebuilt.encode_game(GAME, 2000, 1800, "1-0", 64) == encoder.encode_game(GAME, 2000, 1800, "1-0", 64)  # type: ignore[attr-defined]


def test_an_edited_record_or_another_vocabulary_is_refused(tmp_path: Path) -> None:
    text = BpeTokenizer.load_saved(POLISH_8192)
    path = tmp_path / "encoder.json"
    write_encoder(text, path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["spec"]["special_tokens"] = {"<|endoftext|>": 9000}  # the identity field is left as it was
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(IntegrityError, match="encoder.json: rebuilds vocabulary .* not the recorded"):
        read_encoder(path, text.identity)
    write_encoder(make_encoder("uci"), path)
    with pytest.raises(IntegrityError, match="not the job's"):
        read_encoder(path, text.identity)


def test_unknown_kinds_and_foreign_specs_are_input_errors() -> None:
    record = describe(make_encoder("san"))
    with pytest.raises(InputError, match="unknown encoder kind 'audio'"):
        rebuild(record.model_copy(update={"kind": "audio"}))
    with pytest.raises(InputError, match="not a text encoder's spec: pattern: Field required"):
        rebuild(EncoderRecord(kind="text", identity=record.identity, spec=record.spec))


@pytest.mark.parametrize(("encoder", "field", "edited", "problem"), [
    ("text", "ranks", "ż" * 8, "its ranks"),
    ("chess-bpe", "tokenizer_json", '{"model": ', "its tokenizer_json: not a chess BPE"),
])
def test_an_edited_spec_is_an_input_error_naming_the_file(tmp_path: Path, encoder: str, field: str, edited: str,
                                                           problem: str) -> None:
    """A hand-edited spec is the user's mistake (one line, exit 2), never a library's own exception."""
    original = encoders()[0 if encoder == "text" else 3]
    path = tmp_path / "encoder.json"
    write_encoder(original, path)  # type: ignore[arg-type]
    record = json.loads(path.read_text(encoding="utf-8"))
    record["spec"][field] = edited
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(InputError, match=f"^{path}: .*{problem}"):
        read_encoder(path, original.identity)  # type: ignore[attr-defined]
