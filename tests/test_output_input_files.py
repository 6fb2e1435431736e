"""gpuplan.output_files and gpuplan.input_files: the one place that writes and the one place that
reads a user's path (issue 28, items 1 and 2).

Rules under test (DESIGN.md "Conventions", the modules' docstrings): an output path that exists and
is not a regular file is refused before anything is written and is left as it was; a symbolic link
is written through (the link stays a link); a dangling link or a loop is refused; a regular file is
replaced atomically keeping its permission bits. An input is read with a size bound; a pipe is read
as a stream; a device, socket or folder is refused; every OS error is one InputError naming the field.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuplan.errors import InputError
from gpuplan.input_files import (MAX_DATA_BYTES, MAX_SETTINGS_BYTES, path_kind, read_input_bytes,
                                 read_input_text, regular_input_file)
from gpuplan.output_files import (atomic_output, check_output_folder, check_output_path, make_output_folder,
                                  write_atomic)

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def _one_line(exc: pytest.ExceptionInfo, field: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{field}: ") and exc.value.field == field, msg
    return msg


@pytest.fixture
def char_device(tmp_path):
    """A character device in a private folder (/dev/null's numbers, 1:3): `mknod -m 666 n c 1 3`."""
    if not ROOT:
        pytest.skip("mknod needs root")
    node = tmp_path / "n"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    yield node
    node.unlink()


# ---- outputs ----------------------------------------------------------------------------------------

def test_a_device_is_refused_and_stays_a_device(char_device):
    with pytest.raises(InputError) as exc:
        check_output_path(char_device, "out")
    assert "character device" in _one_line(exc, "out")
    with pytest.raises(InputError):
        write_atomic(char_device, "text", "out")
    assert stat.S_ISCHR(os.lstat(char_device).st_mode)  # never replaced by a regular file


@pytest.mark.parametrize("kind", ["fifo", "folder", "socket"])
def test_a_fifo_folder_or_socket_is_refused(tmp_path, kind):
    p = tmp_path / "target"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "folder":
        p.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(p))
    try:
        with pytest.raises(InputError) as exc:
            write_atomic(p, "text", "out")
        assert {"fifo": "FIFO", "folder": "folder", "socket": "socket"}[kind] in _one_line(exc, "out")
        mode = os.lstat(p).st_mode
        assert {"fifo": stat.S_ISFIFO, "folder": stat.S_ISDIR, "socket": stat.S_ISSOCK}[kind](mode)
        assert sorted(x.name for x in tmp_path.iterdir()) == ["target"]  # no temporary file left
    finally:
        if kind == "socket":
            sock.close()


def test_a_symlink_is_written_through_and_keeps_the_target_mode(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(real.name)
    write_atomic(link, "new", "out")
    assert link.is_symlink() and os.readlink(link) == real.name  # the link stays a link
    assert real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_chain_of_links_is_followed_to_the_file(tmp_path):
    (tmp_path / "f").write_text("old")
    (tmp_path / "b").symlink_to("f")
    (tmp_path / "a").symlink_to("b")
    write_atomic(tmp_path / "a", "new", "out")
    assert (tmp_path / "f").read_text() == "new" and (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_a_link_to_a_device_is_refused(char_device, tmp_path):
    link = tmp_path / "to-device"
    link.symlink_to(char_device)
    with pytest.raises(InputError) as exc:
        write_atomic(link, "x", "plot")
    assert "character device" in _one_line(exc, "plot")
    assert stat.S_ISCHR(os.lstat(char_device).st_mode) and link.is_symlink()


def test_dangling_links_and_loops_are_refused(tmp_path):
    (tmp_path / "dangling").symlink_to("missing")
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    with pytest.raises(InputError) as exc:
        check_output_path(tmp_path / "dangling", "out")
    assert "missing file" in _one_line(exc, "out")
    with pytest.raises(InputError) as exc:
        check_output_path(tmp_path / "l1", "out")
    assert "loop" in _one_line(exc, "out")
    assert not (tmp_path / "missing").exists()


def test_a_regular_file_is_replaced_atomically_keeping_its_mode(tmp_path):
    p = tmp_path / "rows.csv"
    p.write_text("old")
    p.chmod(0o600)
    with pytest.raises(RuntimeError):
        with atomic_output(p, "out") as tmp:
            tmp.write_text("half")
            raise RuntimeError("the writer failed")
    assert p.read_text() == "old" and sorted(x.name for x in tmp_path.iterdir()) == ["rows.csv"]
    write_atomic(p, "new", "out")
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == 0o600


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.txt", "x", "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644  # 0o666 & ~0o022, as open(..., "w")


@pytest.mark.parametrize("name", ["x" * 256, "/".join(["d"] * 3000)])
def test_names_too_long_are_one_line(tmp_path, name):
    with pytest.raises(InputError) as exc:
        check_output_path(tmp_path / name, "out")
    _one_line(exc, "out")


def test_write_errors_are_one_line(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(InputError) as exc:
        write_atomic(tmp_path / "f.txt", "x", "out")
    assert "no space left" in _one_line(exc, "out")
    assert list(tmp_path.iterdir()) == []


def test_output_folders(tmp_path):
    assert make_output_folder(tmp_path / "a" / "b", "out").is_dir()  # created with its parents
    assert check_output_folder(tmp_path / "a", "out") == tmp_path / "a"  # an existing folder is fine
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError) as exc:
        check_output_folder(tmp_path / "file", "out")
    assert "regular file" in _one_line(exc, "out")
    with pytest.raises(InputError):
        check_output_folder(tmp_path / "file" / "below", "out")
    assert (tmp_path / "file").read_text() == "x"


def test_plot_suffixes(tmp_path):
    with pytest.raises(InputError) as exc:
        check_output_path(tmp_path / "p.gif", "plot", (".png", ".svg", ".pdf"))
    assert ".png" in _one_line(exc, "plot")


# ---- inputs -----------------------------------------------------------------------------------------

def test_a_regular_file_is_read_and_a_large_one_refused_before_reading(tmp_path):
    p = tmp_path / "rows.csv"
    p.write_bytes(b"\xef\xbb\xbfa,b\n")
    assert read_input_text(p, "file") == "a,b\n"  # the byte-order mark dropped
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(MAX_DATA_BYTES + 1)  # sparse: no disk used
    with pytest.raises(InputError) as exc:
        read_input_bytes(big, "file")
    assert f"{MAX_DATA_BYTES + 1:,} bytes" in _one_line(exc, "file")
    # the bounds: 16 MiB for settings, 64 MiB for measurements (input_files docstring)
    assert (MAX_SETTINGS_BYTES, MAX_DATA_BYTES) == (16 * 2**20, 64 * 2**20)


def test_a_device_is_refused(char_device):
    with pytest.raises(InputError) as exc:
        read_input_bytes(char_device, "catalog")
    assert "character device" in _one_line(exc, "catalog")


def test_dev_zero_is_refused():
    # /dev/zero never ends: reading it whole was a MemoryError (issue 28)
    with pytest.raises(InputError) as exc:
        read_input_bytes("/dev/zero", "catalog")
    assert "character device" in _one_line(exc, "catalog")


def test_a_pipe_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(b"a,b\n1,2\n")

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert read_input_bytes(fifo, "file") == b"a,b\n1,2\n"
    finally:
        t.join(5)


def test_a_fifo_nobody_writes_is_refused_not_a_hang(tmp_path, monkeypatch):
    import gpuplan.input_files as input_files

    monkeypatch.setattr(input_files, "FIFO_WRITER_WAIT_S", 0.2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as exc:
        read_input_bytes(fifo, "file")
    assert "nothing was written" in _one_line(exc, "file")


def test_a_stream_past_the_bound_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer():
        try:
            with open(fifo, "wb") as fh:
                fh.write(b"x" * 5000)
        except BrokenPipeError:
            pass

    t = threading.Thread(target=writer)
    t.start()
    try:
        with pytest.raises(InputError) as exc:
            read_input_bytes(fifo, "spec", max_bytes=1000)
        assert "more than 1,000 bytes" in _one_line(exc, "spec")
    finally:
        t.join(5)


def test_process_substitution_reads_like_a_file(tmp_path):
    # `gpuplan validate <(cat f.csv)` said "no such file" (issue 28): /dev/fd/N is a pipe
    src = tmp_path / "f.txt"
    src.write_text("hello")
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[1] / 'src')!r}); "
            "from gpuplan.input_files import read_input_text; print(read_input_text(sys.argv[1], 'file'))")
    out = subprocess.run(["bash", "-c", f'"$0" -c "$1" <(cat {src})', sys.executable, code],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "hello\n", out.stderr


@pytest.mark.parametrize("case,words", [
    ("missing", "no such file"), ("folder", "folder"), ("long", "too long"), ("loop", "loop"),
    ("dangling", "missing file"), ("nul", "NUL"),
])
def test_os_errors_are_one_line_naming_the_field(tmp_path, case, words):
    path = {"missing": tmp_path / "absent.csv", "folder": tmp_path, "long": tmp_path / ("x" * 300),
            "loop": tmp_path / "l1", "dangling": tmp_path / "d", "nul": "a\x00b"}[case]
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    (tmp_path / "d").symlink_to("nowhere")
    with pytest.raises(InputError) as exc:
        read_input_bytes(path, "file")
    assert words in _one_line(exc, "file")


@pytest.mark.parametrize("code,words", [(errno.EACCES, "permission denied"), (errno.EFBIG, "file too large"),
                                        (errno.EISDIR, "folder"), (errno.ENAMETOOLONG, "too long")])
def test_open_errors_are_one_line(tmp_path, monkeypatch, code, words):
    p = tmp_path / "f.csv"
    p.write_text("x")

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "open", refuse)  # root reads a 0o000 file anyway: the error is simulated
    with pytest.raises(InputError) as exc:
        read_input_bytes(p, "file")
    assert words in _one_line(exc, "file")


def test_readers_that_seek_refuse_pipes(tmp_path):
    fifo = tmp_path / "t.npy"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as exc:
        regular_input_file(fifo, "file", "tensor file")
    assert "regular file" in _one_line(exc, "file")


def test_path_kind_never_raises(tmp_path):
    assert path_kind(tmp_path) == "folder" and path_kind("x" * 5000) is None and path_kind("a\x00b") is None
    assert path_kind("/dev/null") == "device"
