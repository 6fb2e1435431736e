"""Files gpuplan reads (catalog TOML, sweep specs, CSV rows, config.json, tool logs, profiles): the one
place that opens a user's path, with a size bound.

`read_input_bytes(path, field, max_bytes=...)` / `read_input_text(...)`:

- a regular file (or a link to one) is read whole if it holds at most `max_bytes`; a larger one is
  refused before it is read;
- a pipe (`gpuplan validate <(cat rows.csv)`, `/dev/stdin` fed by a pipe, a FIFO) is read as a
  stream, and refused once it passes `max_bytes`; a named FIFO is opened without waiting and gets
  FIFO_WRITER_WAIT_S for a writer to send something, so a FIFO nobody writes to is one line, never
  a hang (an anonymous pipe has its writer already and is read as long as it writes);
- anything else (a character or block device such as /dev/zero, a socket, a folder) is refused:
  a device can be endless and a folder is not a file;
- every OS error (no such file, name too long, permission denied, a loop of links, file too large)
  is a one-line InputError naming `field`, never a traceback.

The bounds (what a file of each kind may hold; each far above any real file of its kind, and low
enough that parsing stays within memory): `MAX_SETTINGS_BYTES` = 16 MiB for hand-written settings
(catalog TOML, sweep specs, profiles, importer configs, config.json), `MAX_DATA_BYTES` = 64 MiB for
measurements (CSV rows, sweep results, tool logs and result JSON). docs/cli.md lists them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuplan.errors import InputError
from gpuplan.output_files import kind_of, os_error
from gpuplan.validation_rules import decode_utf8

MIB = 1024**2

#: hand-written settings: catalog TOML (`--catalog`, GPUPLAN_CATALOG), sweep specs, calibration
#: profiles, importer configs, config.json. The largest bundled catalog file is ~60 KB and a
#: Hugging Face config.json a few KB; 16 MiB is ~250x the former.
MAX_SETTINGS_BYTES = 16 * MIB

#: measurements: validation / calibration CSVs, sweep results, tool logs and result JSON (vLLM,
#: SGLang, nccl-tests, mamf, torchtitan, Megatron). ../shared/validation's largest CSV is ~1 MB and
#: a vLLM result JSON with per-request latencies for 10,000 requests ~30 MB; parsed in Python a
#: file takes ~10x its size in memory, so 64 MiB keeps a parse well under 1 GiB.
MAX_DATA_BYTES = 64 * MIB

#: seconds a named FIFO waits for its first bytes (or its writer's close) before it is refused
FIFO_WRITER_WAIT_S = 10.0

_ALLOWED = "a readable regular file or a pipe"
_CHUNK = 1 * MIB


def _show(path: str | Path, limit: int = 120) -> str:
    text = str(path)
    if not text.isprintable():
        text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2 + 3:]}"


def _path(path: str | os.PathLike, field: str) -> Path:
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{field}: empty path; give a file", field=field, allowed=_ALLOWED)
    if "\x00" in text:
        raise InputError(f"{field}: the path holds a NUL character", field=field, allowed=_ALLOWED)
    return Path(text).expanduser()


def _too_big(field: str, p: Path, max_bytes: int, size: int | None = None) -> InputError:
    got = f"{size:,} bytes" if size is not None else f"more than {max_bytes:,} bytes"
    return InputError(f"{field}: '{_show(p)}' holds {got}; the limit for this kind of file is {max_bytes:,} bytes "
                      f"({max_bytes / MIB:g} MiB)", field=field, allowed=f"a file of <= {max_bytes:,} bytes")


def input_stat(path: str | os.PathLike, field: str, what: str = "file") -> tuple[Path, os.stat_result]:
    """(path, stat following links) of an input; InputError naming `field` when it does not exist or
    cannot be looked at (module doc), or when it is neither a regular file nor a pipe."""
    p = _path(path, field)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        dangling = False
        try:
            dangling = stat.S_ISLNK(os.lstat(p).st_mode)
        except OSError:
            pass
        why = "a symbolic link to a missing file" if dangling else "no such file"
        raise InputError(f"{field}: {why} '{_show(p)}'", field=field, allowed=f"an existing {what}") from None
    except OSError as exc:
        raise os_error(exc, field, p, doing="read", allowed=_ALLOWED) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        hint = "; give a file inside it" if stat.S_ISDIR(st.st_mode) else ""
        raise InputError(f"{field}: '{_show(p)}' is {kind_of(st.st_mode)}, not a {what}{hint}", field=field,
                         allowed=_ALLOWED)
    return p, st


def path_kind(path: str | os.PathLike) -> str | None:
    """What is at `path` (links followed): 'file', 'pipe', 'folder', 'device', 'socket', or None when
    nothing can be found there (missing, a name too long, a loop of links, no permission to look).
    Never raises: for telling a name from a path ('llama-3-8b' vs './config.json')."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError, TypeError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "socket" if stat.S_ISSOCK(mode) else "other"


def regular_input_file(path: str | os.PathLike, field: str, what: str = "file",
                       max_bytes: int | None = None) -> tuple[Path, os.stat_result]:
    """(path, stat) of an input a reader opens itself (safetensors and .npy, read at offsets): like
    `input_stat`, but a pipe is refused too (it cannot be read twice or at an offset), and so is a
    file past `max_bytes` when given."""
    p, st = input_stat(path, field, what)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{field}: '{_show(p)}' is {kind_of(st.st_mode)}; a {what} is read at offsets, so give "
                         "a regular file", field=field, allowed="a readable regular file")
    if max_bytes is not None and st.st_size > max_bytes:
        raise _too_big(field, p, max_bytes, st.st_size)
    return p, st


def is_input_file(path: str | os.PathLike) -> bool:
    """True when `path` names a regular file or a pipe gpuplan could read (no error raised)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError, TypeError):
        return False
    return stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)


def read_input_bytes(path: str | os.PathLike, field: str, *, max_bytes: int = MAX_DATA_BYTES,
                     what: str = "file") -> bytes:
    """The bytes of the file or pipe `path` (module doc); InputError naming `field` otherwise."""
    p, st = input_stat(path, field, what)
    if stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
        raise _too_big(field, p, max_bytes, st.st_size)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise os_error(exc, field, p, doing="read", allowed=_ALLOWED) from None
    try:
        st = os.fstat(fd)  # what was opened (the path may have changed since the check)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise InputError(f"{field}: '{_show(p)}' is {kind_of(st.st_mode)}, not a {what}", field=field,
                             allowed=_ALLOWED)
        if stat.S_ISFIFO(st.st_mode) and not _anonymous_pipe(fd) and not _wait_for_writer(fd):
            raise InputError(f"{field}: nothing was written to the FIFO '{_show(p)}' within {FIFO_WRITER_WAIT_S:g} s",
                             field=field, allowed=_ALLOWED)
        os.set_blocking(fd, True)  # opened without waiting for a writer; now read as a stream
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _too_big(field, p, max_bytes)
        return b"".join(chunks)
    except OSError as exc:
        raise os_error(exc, field, p, doing="read", allowed=_ALLOWED) from None
    finally:
        os.close(fd)


def _anonymous_pipe(fd: int) -> bool:
    """True for a pipe without a name (`<(...)`, a shell pipe on stdin): its writer exists already."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:  # no /proc (macOS): treat it as a named FIFO
        return False


def _wait_for_writer(fd: int) -> bool:
    """Whether a writer sent bytes (or came and went) within FIFO_WRITER_WAIT_S on the FIFO `fd`."""
    import select

    if not hasattr(select, "poll"):  # pragma: no cover - Windows has no FIFOs
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(FIFO_WRITER_WAIT_S * 1000))


def read_input_text(path: str | os.PathLike, field: str, *, max_bytes: int = MAX_DATA_BYTES,
                    what: str = "file") -> str:
    """`read_input_bytes` decoded as UTF-8 (a BOM is dropped); InputError naming `field` otherwise."""
    raw = read_input_bytes(path, field, max_bytes=max_bytes, what=what)
    return decode_utf8(raw, f"{field}: '{_show(path)}'", field)

