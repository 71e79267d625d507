"""A verification stamp in ``$TOKPACK_CACHE/verified/`` only ever saves a verification: a stamp
that is damaged, of another schema, or of another seal has the pack hashed again (and
re-stamped), never an error, and never vouches for files it does not describe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokpack.store import DocumentCut, Pack, PackWriter, Source
from tokpack.store.stamps import VerificationStamp, stamp_file
from tokpack.vocab.identity import VocabIdentity

VOCABULARY = VocabIdentity(scheme="demo", sha256="0" * 64, n_vocab=50)


@pytest.fixture()
def pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pack, verified once and stamped, in a test's own cache."""
    monkeypatch.setenv("TOKPACK_CACHE", str(tmp_path / "cache"))
    with PackWriter(tmp_path / "pack", vocabulary=VOCABULARY) as writer:
        writer.add_documents([[1, 2, 3], [4, 5], [6, 7, 8, 9]])
        writer.commit(source=Source(name="demo.txt", sha256="1" * 64, n_bytes=5), cut=DocumentCut(rule="demo"),
                      pad_id=None)
    Pack(tmp_path / "pack")
    assert stamp_file(tmp_path / "pack").is_file()
    return tmp_path / "pack"


def verifications(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = Pack.verify
    monkeypatch.setattr(Pack, "verify", lambda self, **kw: calls.append(1) or real(self, **kw))
    return calls


def _other_schema(stamp: dict[str, object]) -> dict[str, object]:
    return stamp | {"schema": "tokpack.verified.v1"}


def _other_seal(stamp: dict[str, object]) -> dict[str, object]:
    return stamp | {"seal": "0" * 64}


def _extra_field(stamp: dict[str, object]) -> dict[str, object]:
    return stamp | {"checked": ["tokens.npy"]}


@pytest.mark.parametrize("rewrite", [_other_schema, _other_seal, _extra_field, None],
                         ids=["other schema", "other seal", "unknown field", "not JSON"])
def test_a_stamp_that_does_not_check_out_costs_one_verification(pack: Path, monkeypatch: pytest.MonkeyPatch,
                                                                rewrite: object) -> None:
    path = stamp_file(pack)
    stamp = json.loads(path.read_text())
    path.write_text("{not json" if rewrite is None else json.dumps(rewrite(stamp)))  # type: ignore[operator]
    calls = verifications(monkeypatch)
    assert list(Pack(pack).tokens) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert calls == [1]
    VerificationStamp.model_validate_json(path.read_text())  # stamped again, in this schema
    Pack(pack)
    assert calls == [1]
