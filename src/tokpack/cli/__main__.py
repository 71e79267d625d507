"""``python -m tokpack.cli``: the same as the ``tokpack`` command."""

from tokpack.cli import script

script()
