"""The ordered map over worker processes: results in input order, a bounded number in flight, and a
worker that dies is said to have died (never a hang, never a bare pool error)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tokpack._pool import ordered_map, process_pool
from tokpack.errors import WorkerDied


def test_results_come_in_order_and_the_input_is_read_as_results_are_taken() -> None:
    taken: list[int] = []

    def arguments() -> Iterator[tuple[int, int]]:
        for n in range(40):
            taken.append(n)
            yield (n, 2)

    with process_pool(2) as pool:
        results = ordered_map(pool, pow, arguments(), ahead=3)
        assert next(results) == 0
        assert len(taken) == 3  # no more than `ahead` handed to the pool before the first result
        assert list(results) == [n * n for n in range(1, 40)]


def test_a_worker_that_dies_is_a_worker_died_error() -> None:
    with process_pool(2) as pool, pytest.raises(WorkerDied, match="ended without its result"):
        list(ordered_map(pool, os._exit, [(1,)]))


def test_an_error_in_the_function_is_raised_as_it_is() -> None:
    with process_pool(1) as pool, pytest.raises(ValueError):
        list(ordered_map(pool, int, [("7",), ("not a number",)]))
