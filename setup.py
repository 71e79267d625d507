"""The compiled encoder's build: one C extension (C11 and the CPython API only); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tokpack.vocab._bpe", sources=["src/tokpack/vocab/_bpe.c"],
                             depends=["src/tokpack/vocab/_bpe_classes.h"],
                             extra_compile_args=["-std=c11", "-O3"])])
