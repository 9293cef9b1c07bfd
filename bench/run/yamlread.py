"""YAML from users, read without trusting it: bench.yamlsafe (the one home, below the tasks that also read
YAML), re-exported for the layers that have always imported it from here."""

from __future__ import annotations

from bench.yamlsafe import MAX_CHARS, MAX_NODES, excerpt, load_yaml

__all__ = ["MAX_CHARS", "MAX_NODES", "excerpt", "load_yaml"]
