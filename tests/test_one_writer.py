"""One writer (issue 42): every file the suite writes below a folder a colleague can write goes through
bench.core.safefs (no link followed, regular files only, atomic). This lint reads the source of bench/, tasks/,
slurm/ and reports/ (ast) and fails on a call that opens a path for writing itself: `savefig(path)`,
`open(path, "w"/"a"/"x"/"+")` or `Path.open("w")`, `.write_text(`, `.write_bytes(` (other than
safefs's own), `.to_csv(path)`, the shutil writers on a path (copy, copy2, copyfile, move, copytree),
`cv2.imwrite`, `torch.save`/`np.save`/`np.savez` to a path. A target that is an in-memory buffer
(a name bound to io.BytesIO()/io.StringIO() in the same function) is not a path."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bench", "tasks", "slurm", "reports")
EXEMPT = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bench" / "core" / "safefs").glob("*.py")}  # the one writer
SHUTIL_WRITERS = {"copy", "copy2", "copyfile", "move", "copytree"}
# Justified exceptions, (file, function): none needed today; a new one says here why it cannot be safefs.
ALLOWED: dict[tuple[str, str], str] = {}


def _buffers(fn: ast.AST) -> set[str]:
    """Names bound to io.BytesIO() / io.StringIO() in `fn`."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in ("BytesIO", "StringIO"):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _modules(tree: ast.Module) -> set[str]:
    """Names bound by imports (a call on one is a module's function, such as table2.to_csv(frame))."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _mode(call: ast.Call, pos: int) -> str:
    args = [*call.args[pos : pos + 1], *(k.value for k in call.keywords if k.arg == "mode")]
    return next((a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)), "")


def _target_is_buffer(call: ast.Call, pos: int, buffers: set[str]) -> bool:
    args = call.args[pos : pos + 1] or [k.value for k in call.keywords if k.arg in ("fname", "path_or_buf", "f")]
    return bool(args) and isinstance(args[0], ast.Name) and args[0].id in buffers


def violations(source: str, name: str) -> list[str]:
    """Each raw write in `source` (the text of the file `name`), as 'file:line: what'."""
    tree = ast.parse(source)
    modules, found = _modules(tree), []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] or [tree]
    seen: set[int] = set()
    for scope in sorted(scopes, key=lambda n: -getattr(n, "lineno", 0)):  # innermost first
        buffers = _buffers(scope)
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call) and id(n) not in seen):
            seen.add(id(call))
            what = _raw_write(call, modules, buffers)
            where = getattr(scope, "name", "")
            if what and (name, where) not in ALLOWED:
                found.append(f"{name}:{call.lineno}: {what}")
    return found


def _raw_write(call: ast.Call, modules: set[str], buffers: set[str]) -> str | None:
    f = call.func
    attr = f.attr if isinstance(f, ast.Attribute) else None
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
    if isinstance(f, ast.Name) and f.id == "open" and set(_mode(call, 1)) & set("wax+"):
        return "open(path, write mode)"
    if attr == "open" and owner not in modules and set(_mode(call, 0)) & set("wax+"):
        return "Path.open(write mode)"
    if attr == "savefig" and not _target_is_buffer(call, 0, buffers):
        return "savefig(path): draw into io.BytesIO and place it with safefs.write_bytes"
    if attr in ("write_text", "write_bytes") and owner != "safefs":
        return f".{attr}(): use safefs.{attr}"
    if attr == "to_csv" and owner not in modules and (call.args or any(k.arg == "path_or_buf" for k in call.keywords)):
        if not _target_is_buffer(call, 0, buffers):
            return "to_csv(path): write the text with safefs"
    if owner == "shutil" and attr in SHUTIL_WRITERS:
        return f"shutil.{attr} on a path"
    if owner == "cv2" and attr == "imwrite":
        return "cv2.imwrite(path): encode with cv2.imencode and place with safefs"
    if owner == "torch" and attr == "save" and not _target_is_buffer(call, 1, buffers):
        return "torch.save(path)"
    if owner in ("np", "numpy") and attr in ("save", "savez", "savez_compressed"):
        if not _target_is_buffer(call, 0, buffers):
            return f"np.{attr}(path)"
    return None


def test_every_write_goes_through_safefs() -> None:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name not in EXEMPT:
                found += violations(path.read_text(), name)
    assert not found, "raw writes outside bench/core/safefs/:\n" + "\n".join(found)


def test_the_lint_sees_each_kind_of_raw_write() -> None:
    """The patterns it must catch (and the in-memory forms it must let through)."""
    bad = [
        "fig.savefig(path, dpi=100)",
        "open(p, 'w')",
        "open(p, mode='ab')",
        "Path(p).open('w')",
        "p.write_text('x')",
        "p.write_bytes(b'x')",
        "df.to_csv(p, index=False)",
        "df.to_csv(path_or_buf=p)",
        "shutil.copyfile(a, b)",
        "shutil.move(a, b)",
        "cv2.imwrite(p, img)",
        "torch.save(state, p)",
        "np.savez(p, a=a)",
    ]
    for line in bad:
        assert violations(f"def f():\n    {line}\n", "x.py"), line
    good = [
        "buf = io.BytesIO()\n    fig.savefig(buf, format='png')",
        "open(p)",
        "open(p, 'rb')",
        "safefs.write_text(p, 'x')",
        "s = df.to_csv(index=False)",
        "buf = io.BytesIO()\n    torch.save(state, buf)",
        "shutil.copyfileobj(a, b)",
    ]
    for line in good:
        assert not violations(f"import io\ndef f():\n    {line}\n", "x.py"), line
    assert not violations("import table2\ndef f():\n    table2.to_csv(frame)\n", "x.py")
