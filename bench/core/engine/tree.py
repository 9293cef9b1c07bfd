"""The one order in which micro-batch gradients are added: a balanced binary tree over the index order.

A binary counter builds it incrementally: each new node (a micro-batch's gradient, level 0) merges with
the newest partial sum while their levels are equal (older + newer), and what is left at the end folds
smaller subtrees first. Every power-of-two split S = W × A builds the same tree, which is what makes ḡ
bit-identical across splits (bench.core.engine.reduction). TreeSum, PairwiseGrads and the batched path
(bench.core.engine.batched) all add through these two functions, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
Stack = list[tuple[int, T]]  # (level, partial sum), levels strictly decreasing


def push(stack: Stack, node: T, add: Callable[[T, T], T], level: int = 0) -> None:
    """Add `node` (a subtree of `level`) to the counter: merge while the newest partial has its level."""
    while stack and stack[-1][0] == level:
        node, level = add(stack.pop()[1], node), level + 1
    stack.append((level, node))


def fold(stack: Stack, add: Callable[[T, T], T], node: T | None = None) -> T:
    """The whole sum: what is left on the counter (and `node`, the newest, if given), smaller subtrees
    first. The stack is empty afterwards."""
    if node is None:
        node = stack.pop()[1]
    while stack:
        node = add(stack.pop()[1], node)
    return node


def by_levels(nodes: list[T], add_pairs: Callable[[list[T], list[T]], list[T]]) -> T:
    """The sum `push` and `fold` build over `nodes` (level-0 nodes in index order), built one level at a
    time: all pairs of a level in one call add_pairs(olders, newers) (one fused op for all of them: log2(A)
    calls instead of A − 1), then each level's odd node out folded as `fold` does, smaller subtrees first.
    The same tree, so the same bits (tests/engine/test_tree.py holds the shapes equal for A = 1 … 40)."""
    if not nodes:
        raise ValueError("by_levels: no nodes to add")
    left: list[T] = []  # each level's odd node out (the newest of that level): lower levels first
    while len(nodes) > 1:
        if len(nodes) % 2:
            left.append(nodes[-1])
            nodes = nodes[:-1]
        nodes = add_pairs(nodes[0::2], nodes[1::2])
    if not left:
        return nodes[0]
    node = left[0]
    for older in [*left[1:], nodes[0]]:
        node = add_pairs([older], [node])[0]
    return node
