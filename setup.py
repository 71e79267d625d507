"""The compiled encoder's build: one C extension, ``tokpack.vocab._bpe`` (C11 and the CPython API
only). Optional: where it cannot be compiled the install still succeeds and tokpack encodes with
tiktoken, saying so (``tokpack.vocab.compiled.MISSING``). Everything else is in pyproject.toml."""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-std=c11", "-O3"]
setup(ext_modules=[Extension("tokpack.vocab._bpe", sources=["src/tokpack/vocab/_bpe.c"],
                             depends=["src/tokpack/vocab/_bpe_classes.h"], extra_compile_args=flags,
                             optional=True)])
