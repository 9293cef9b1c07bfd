"""YAML from users (matrix files, `--set key=value`, a data set's YAML), read without trusting it; the one
home for reading YAML, imported by every layer that reads it.

- YAML 1.2's core schema, not PyYAML's 1.1: `1:20` is the string "1:20", not the sexagesimal 80 (so
  `--set T1=1:20` is refused as not a number, never run with T1 = 80); `yes`/`no`/`on`/`off` are
  strings, only true/false are booleans; `017` is 17 (0o17 is octal); no timestamps.
- A key given twice in one mapping is an error (one line naming the file, the key and its line), not
  the last value silently kept; keys merged in with `<<` may be overridden, as YAML says.

- Aliases are bounded: a document is composed first, its size with every alias expanded is counted
  in nodes and in characters (memoised per node, so the count itself is cheap) and a document past
  MAX_NODES nodes or MAX_CHARS characters is refused in one line before anything is built: ten
  thousand aliases of one 300 kB string are 3 GB once expanded, though each is one node. PyYAML
  shares an aliased object instead of copying it, so such a file loads in microseconds; it is what is
  done with it next (an error message that prints it, a deepcopy, a JSON dump) that takes gigabytes.
- Numbers in exponent form (1e-3, 2e3) are numbers, as in YAML 1.2 and JSON: PyYAML follows YAML 1.1,
  whose float needs a dot (1.0e-3), and reads them as strings. An integral one written without a dot
  (2e3) is an int, so it serves a count (T1, eval_every) as well as a rate.
- `excerpt` quotes a value in a message in bounded space (reprlib), whatever its size.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

import yaml

from bench.core.errors import UserError

MAX_NODES = 100_000  # the paper matrix is a few hundred nodes
MAX_CHARS = 16 << 20  # characters of every scalar with aliases expanded (a matrix file is at most 4 MB)
_EXPONENT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_SHORT = reprlib.Repr()  # (keyword arguments only from Python 3.12)
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxtuple = 4
_SHORT.maxlevel = 2


class _Duplicate(yaml.YAMLError):
    """A key given twice in one mapping."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's core schema (its own resolver table: SafeLoader's is untouched) and
    duplicate keys refused."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        line = key_node.start_mark.line + 1
                        raise _Duplicate(f"duplicate key {excerpt(key)} (line {line}); give each key once")
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    pass
        return super().construct_mapping(node, deep=deep)


_DIGITS = list("-+0123456789")
_CORE = [  # YAML 1.2 core schema (underscores between digits kept, as the suite's files have used them)
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)$", _DIGITS),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        [*_DIGITS, "."],
    ),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", ["<"]),
]
_Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE:
    _Loader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """YAML 1.2 ints: decimal (a leading 0 is no octal), 0o octal, 0x hex; never sexagesimal."""
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    if text.startswith("0o"):
        return sign * int(text[2:], 8)
    if text.startswith("0x"):
        return sign * int(text[2:], 16)
    return sign * int(text, 10)


def _exponent_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | int:
    """A float; one in exponent form written without a dot and integral (2e3) is an int, so it serves a
    count (T1, eval_every) as well as a rate."""
    value = loader.construct_yaml_float(node)
    text = str(node.value)
    if _EXPONENT.match(text) and "." not in text and float(value).is_integer() and abs(value) < 2**63:
        return int(value)
    return value


_Loader.add_constructor("tag:yaml.org,2002:int", _core_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _exponent_float)


def excerpt(value: Any) -> str:
    """repr(value) cut to at most 120 characters, computed in bounded time and memory."""
    text = _SHORT.repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _expanded_size(node: yaml.Node, memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(nodes, characters of scalars) in the document with every alias expanded (each distinct node counted
    once, then reused), saturating past the bounds."""
    key = id(node)
    if key not in memo:
        memo[key] = (0, 0)  # a recursive alias counts as itself while it is being counted
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        nodes, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        for child in children:
            n, c = _expanded_size(child, memo)
            nodes, chars = min(nodes + n, MAX_NODES + 1), min(chars + c, MAX_CHARS + 1)
        memo[key] = (nodes, chars)
    return memo[key]


def load_yaml(text: str, where: str) -> Any:
    """The document in `text` (None when empty), refused in one line naming `where` when it is not valid
    YAML (a NUL, a control character or undecodable bytes included), nests too deep, expands past
    MAX_NODES nodes or MAX_CHARS characters, or holds an integer past Python's digit limit."""
    loader = None
    try:
        loader = _Loader(text)  # the reader checks the characters here: inside the try
        node = loader.get_single_node()
        if node is None:
            return None
        nodes, chars = _expanded_size(node, {})
        if nodes > MAX_NODES:
            raise UserError(f"{where}: expands to more than {MAX_NODES} values (aliases of aliases?); refused unread")
        if chars > MAX_CHARS:
            raise UserError(f"{where}: expands to more than {MAX_CHARS} characters (aliases of a long value?); refused")
        return loader.construct_document(node)
    except _Duplicate as e:
        raise UserError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{where}: not valid YAML ({excerpt(str(e).splitlines()[0])})") from None
    except RecursionError:
        raise UserError(f"{where}: nests too deep to read") from None
    except ValueError as e:  # int() of more digits than sys.get_int_max_str_digits()
        raise UserError(f"{where}: {excerpt(str(e).splitlines()[0] if str(e) else type(e).__name__)}") from None
    finally:
        if loader is not None:
            loader.dispose()
