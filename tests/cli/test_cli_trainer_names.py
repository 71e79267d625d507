"""The command line's ``--trainer`` choices are exactly the trainers the Python API takes."""

from __future__ import annotations

from typing import get_args

from tokpack.cli._console import TrainerName
from tokpack.vocab.trainers import Trainer


def test_the_trainer_choices_are_the_api_s_trainers() -> None:
    assert sorted(name.value for name in TrainerName) == sorted(get_args(Trainer))
