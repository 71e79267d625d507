"""The tokenizers a trained one must beat, built the same way on the same training text.

- ``hf-default``: Hugging Face's ``ByteLevelBPETokenizer`` with its defaults at the given size.
- ``sentencepiece``: sentencepiece in BPE mode with byte fallback and its default normalization
  (NFKC, newlines to spaces, runs of spaces collapsed: *lossy*, which flatters its figure).
- ``sentencepiece-lossless``: the same with identity normalization and whitespace kept.
- ``gpt2``: GPT-2's 50,257 ids, whose rank file ships in the ``openai-whisper`` source
  distribution; :func:`gpt2_rank_file` fetches it once through pip and caches it.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tokpack._atomic import write_atomically
from tokpack._cache import default_cache_dir
from tokpack.errors import InputError
from tokpack.grading.grade import TokenCounter, bpe_counter

#: SHA-256 of GPT-2's rank file (the same table tiktoken calls ``gpt2``/``r50k_base``).
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
_WHISPER = "openai-whisper==20250625"


def gpt2_rank_file(cache_dir: Path | None = None) -> Path:
    """The path of GPT-2's rank file, fetching it with pip the first time.

    Raises:
        InputError: pip cannot reach a package registry, or the file's hash is not GPT-2's.
    """
    cache_dir = Path(cache_dir or default_cache_dir())
    target = cache_dir / "gpt2.tiktoken"
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == GPT2_RANKS_SHA256:
        return target
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                   "--dest", download, _WHISPER]
        result = subprocess.run(command, capture_output=True, text=True)
        archives = list(Path(download).glob("*.tar.gz"))
        if result.returncode != 0 or not archives:
            last = (result.stderr.strip().splitlines() or ["no archive"])[-1]
            raise InputError(f"cannot fetch GPT-2's ranks ({_WHISPER} via pip): {last}")
        with tarfile.open(archives[0]) as archive:
            member = next((m for m in archive.getmembers() if m.name.endswith("whisper/assets/gpt2.tiktoken")), None)
            handle = archive.extractfile(member) if member else None
            if handle is None:
                raise InputError("has no whisper/assets/gpt2.tiktoken", where=archives[0].name)
            data = handle.read()
    if hashlib.sha256(data).hexdigest() != GPT2_RANKS_SHA256:
        raise InputError("the fetched gpt2.tiktoken does not have GPT-2's SHA-256")
    return write_atomically(target, data)


def gpt2_counter(cache_dir: Path | None = None) -> TokenCounter:
    """GPT-2's vocabulary (50,256 ranks and ``<|endoftext|>``) with GPT-2's pattern."""
    from tokpack.vocab import GPT2_PATTERN
    from tokpack.vocab.loading import load_vocabulary

    tokenizer = load_vocabulary(gpt2_rank_file(cache_dir), pattern=GPT2_PATTERN)
    return bpe_counter(tokenizer, name="gpt2")


def hf_default_counter(texts: Sequence[str], vocab_size: int) -> TokenCounter:
    """Hugging Face's default byte-level BPE trained on ``texts``."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(texts, vocab_size=vocab_size, show_progress=False)
    return TokenCounter(
        "hf-default",
        tokenizer.get_vocab_size(),
        lambda batch: [len(encoding.ids) for encoding in tokenizer.encode_batch(list(batch))],
    )


def sentencepiece_counter(texts: Sequence[str], vocab_size: int, *, lossless: bool = False) -> TokenCounter:
    """sentencepiece BPE with byte fallback trained on the lines of ``texts``.

    Raises:
        InputError: sentencepiece is not installed.
    """
    try:
        import sentencepiece
    except ImportError:
        raise InputError("the sentencepiece baseline needs the sentencepiece package") from None
    options: dict[str, object] = {"model_type": "bpe", "vocab_size": vocab_size, "byte_fallback": True,
                                  "num_threads": os.cpu_count() or 1, "minloglevel": 2}
    if lossless:
        options.update(normalization_rule_name="identity", remove_extra_whitespaces=False)
    model = io.BytesIO()
    lines = (line for text in texts for line in text.splitlines() if line.strip())
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=lines, model_writer=model, **options)  # type: ignore[arg-type]
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    name = "sentencepiece-lossless" if lossless else "sentencepiece"
    return TokenCounter(name, processor.get_piece_size(), lambda batch: [len(ids) for ids in processor.encode(list(batch))])
