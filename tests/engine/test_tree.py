"""The one order of the gradient sum (bench.core.engine.tree): the level-at-a-time sum builds
the binary counter's tree."""

from __future__ import annotations

import pytest

from bench.core.engine import tree


def _shape(older: object, newer: object) -> tuple[object, object]:
    return (older, newer)


def _counter(n: int) -> object:
    stack: tree.Stack = []
    for i in range(n):
        tree.push(stack, i, _shape)
    return tree.fold(stack, _shape)


def _pairs(olders: list[object], newers: list[object]) -> list[object]:
    return [_shape(a, b) for a, b in zip(olders, newers, strict=True)]


@pytest.mark.parametrize("n", range(1, 41))
def test_by_levels_builds_the_counters_tree(n: int) -> None:
    assert tree.by_levels(list(range(n)), _pairs) == _counter(n)


def test_a_running_sum_is_another_tree() -> None:
    """So the comparison above can fail: a left-to-right sum of 5 nodes is not the counter's tree."""
    running: object = 0
    for i in range(1, 5):
        running = _shape(running, i)
    assert running != _counter(5) == tree.by_levels(list(range(5)), _pairs)


def test_by_levels_needs_a_node() -> None:
    with pytest.raises(ValueError, match="no nodes"):
        tree.by_levels([], _pairs)
