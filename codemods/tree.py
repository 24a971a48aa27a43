"""Fast child lists for the file being analysed.

``CSTNode.children`` is computed on every access (libcst visits the node to
find them), which made walking a large file several times dominate the run.
:func:`index` records every node's children once per file; ``children_of``
answers from that record and falls back to libcst for nodes built later
(replacement code). One file is analysed at a time per process.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

_children: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}


def index(module: cst.Module) -> list[cst.CSTNode]:
    """Record the children of every node of ``module``; return all nodes in source order."""
    _children.clear()
    order: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        order.append(node)
        kids = tuple(node.children)
        _children[node] = kids
        stack.extend(reversed(kids))
    return order


def children_of(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    kids = _children.get(node)
    if kids is None:
        kids = tuple(node.children)
    return kids


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``root`` and everything below it, in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children_of(node)))
