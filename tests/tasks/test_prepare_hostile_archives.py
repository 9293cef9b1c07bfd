"""Archives and staging folders a colleague can craft (issue 42): `prepare` checks every tar member
itself (tasks.preparing.member_path: files and folders only, a relative path without `..`, bounded), not
through tarfile's "data" filter (CVE-2025-4517 bypasses it on the Pythons users have), and it works only
in a staging folder it made itself, private; a pre-existing one it did not make is refused in one line."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from bench.cli import main
from tasks.cifar10.tiny import write_tiny
from tasks.preparing import SOURCE
from tests.sources import SYNSETS, tar_add, write_imagenet_archives

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(120)]


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1, err
    return lines[0]


def member(name: str, kind: bytes, target: str = "", payload: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, target, len(payload)
    return info, payload


def evil_class_tar(outside: Path, how: str) -> bytes:
    """A class tar of ImageNet's published shape (n01440764.tar of JPEGs) that tries to write `outside`."""
    pwn = b"pwn"
    up = "../../../../../../../../.." + str(outside)
    rows = {
        "symlink": [member("d", tarfile.SYMTYPE, str(outside)), member("d/x.JPEG", tarfile.REGTYPE, payload=pwn)],
        "relative symlink": [member("up", tarfile.SYMTYPE, up), member("up/x.JPEG", tarfile.REGTYPE, payload=pwn)],
        "hardlink": [member("n01440764_2.JPEG", tarfile.LNKTYPE, str(outside / "secret"))],
        "absolute": [member(str(outside / "x.JPEG"), tarfile.REGTYPE, payload=b"pwn")],
        "dotdot": [member("../../../../x.JPEG", tarfile.REGTYPE, payload=b"pwn")],
        "device": [member("n01440764_3.JPEG", tarfile.CHRTYPE)],
        "fifo": [member("n01440764_4.JPEG", tarfile.FIFOTYPE)],
    }[how]  # fmt: skip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, payload in rows:
            tar.addfile(info, io.BytesIO(payload) if payload else None)
    return buf.getvalue()


@pytest.mark.parametrize("how", ["symlink", "relative symlink", "hardlink", "absolute", "dotdot", "device", "fifo"])
def test_a_class_tar_escaping_the_output_is_refused(tmp_path: Path, capsys, how: str) -> None:
    src, out, outside = tmp_path / "src", tmp_path / "out", tmp_path / "outside"
    write_imagenet_archives(src)
    outside.mkdir()
    (outside / "secret").write_text("private\n")
    train = src / "ILSVRC2012_img_train.tar"
    train.unlink()
    with tarfile.open(train, "w") as outer:
        tar_add(outer, f"{SYNSETS[0][1]}.tar", evil_class_tar(outside, how))
        for _, wnid in SYNSETS[1:]:
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as t:
                tar_add(t, f"{wnid}_1.JPEG", b"x")
            tar_add(outer, f"{wnid}.tar", inner.getvalue())
    assert main(["prepare", "imagenet", "--source", str(src), "--out", str(out)]) == 2
    line = one_error(capsys)
    assert "member" in line and "refused" in line, line
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "private\n"
    assert not out.exists()


def test_a_staging_folder_someone_else_made_is_refused(tmp_path: Path, capsys) -> None:
    """A colleague makes `.out.partial/` beside --out (writable by others), with the `.source` line the
    user's prepare would write and a link inside to a folder of the user's: refused in one line, nothing
    written through the link, and the folder is not turned into the user's prepared set."""
    folder = write_tiny(tmp_path / "src")
    private = tmp_path / "private"
    private.mkdir()
    stage = tmp_path / ".out.partial"
    stage.mkdir()
    stage.chmod(0o777)
    (stage / SOURCE).write_text(f"cifar10 {folder.resolve()}")
    (stage / "cifar-10-batches-py").symlink_to(private, target_is_directory=True)
    args = ["prepare", "cifar10", "--source", str(folder), "--out", str(tmp_path / "out"), "--set", "verify_md5=false"]
    assert main(args) == 2
    line = one_error(capsys)
    assert str(stage) in line and "did not make" in line
    assert list(private.iterdir()) == [] and not (tmp_path / "out").exists()
    os.unlink(stage / "cifar-10-batches-py")
    (stage / SOURCE).unlink()
    stage.rmdir()  # the control: without it, prepare makes its own, private, and goes through
    assert main(args) == 0
    assert not stage.exists() and (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~_umask()


def test_an_interrupted_private_staging_folder_is_resumed(tmp_path: Path, capsys) -> None:
    folder = write_tiny(tmp_path / "src")
    stage = tmp_path / ".out.partial"
    stage.mkdir(mode=0o700)
    (stage / SOURCE).write_text(f"cifar10 {folder.resolve()}")
    args = ["prepare", "cifar10", "--source", str(folder), "--out", str(tmp_path / "out"), "--set", "verify_md5=false"]
    assert main(args) == 0, capsys.readouterr().err


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
