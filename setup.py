"""The compiled encoder's build: one C extension, ``tokpack.vocab._bpe`` (C11 and the CPython API
only). Optional: where it cannot be compiled the install still succeeds and tokpack encodes with
tiktoken, saying so (``tokpack.vocab.compiled.MISSING``). ``TOKPACK_REQUIRE_COMPILED=1`` in the
environment makes a failed build fail the install (``./dev`` sets it: a build that fails there must
not leave the tests running an older build). Everything else is in pyproject.toml.

``_bpe.c`` is the one translation unit: it includes its parts, the ``_bpe_*.h`` beside it (listed
as its dependencies, so a change to one rebuilds it and the source distribution carries them)."""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

VOCAB = Path("src", "tokpack", "vocab")
flags = [] if sys.platform == "win32" else ["-std=c11", "-O3"]
setup(ext_modules=[Extension("tokpack.vocab._bpe", sources=[(VOCAB / "_bpe.c").as_posix()],
                             depends=sorted(path.as_posix() for path in VOCAB.glob("_bpe_*.h")),
                             extra_compile_args=flags,
                             optional=os.environ.get("TOKPACK_REQUIRE_COMPILED") != "1")])
