"""Files and folders gpuplan writes (profiles, rows, reports, plots, tensors, sweep results): the one
place that decides whether a path may be written, and writes it atomically.

Rules (DESIGN.md, "Conventions"), checked by `check_output_path` before any work and again when
writing:

- a path that does not exist is created (its folder must exist and be writable);
- a regular file is replaced atomically: the bytes go to a temporary file in the target's folder,
  which then replaces the target in one `os.replace` (atomic on POSIX and Windows within one file
  system), keeping the old file's permission bits; an interrupted or failed write leaves the old
  file as it was and no temporary file behind;
- a symbolic link is written through: the file it points to (after every link) is replaced as
  above and the link stays a link; a dangling link or a loop of links is refused;
- anything else at the path (a folder, a character or block device, a FIFO, a socket) is never
  written: a one-line InputError naming the option (`field`), exit code 2 in the CLI.

Folders gpuplan writes into (`sweep report --out DIR`, a sweep's `OUT.parts/`) follow the same
rules through `check_output_folder`: an existing folder (or a link to one) is used, a missing one is
created, anything else is refused.

Every OS error on the way (name too long, permission denied, no space left, file too large) is an
InputError naming `field`, never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from gpuplan.errors import InputError

#: longest file name most file systems accept (ext4, APFS, NTFS: 255 bytes)
MAX_NAME_BYTES = 255

_ALLOWED_FILE = "a regular file (or a link to one) in a writable folder, or a new file name"
_ALLOWED_FOLDER = "a folder (existing or new) in a writable folder"


def kind_of(mode: int) -> str:
    """What a stat mode describes, in words ('a regular file', 'a character device', ...)."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def os_error(exc: OSError, field: str, path: str | Path, doing: str = "write",
             allowed: str | None = _ALLOWED_FILE) -> InputError:
    """A one-line InputError for an OS error on `path` (the option `field`)."""
    code = exc.errno
    if code == errno.ENAMETOOLONG:
        why = "the path or one of its names is too long"
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "permission denied" if code != errno.EROFS else "read-only file system"
    elif code == errno.ELOOP:
        why = "a loop of symbolic links"
    elif code == errno.ENOTDIR:
        why = "a part of the path is not a folder"
    elif code == errno.ENOENT:
        why = "no such file or folder"
    elif code == errno.EISDIR:
        why = "it is a folder"
    elif code in (errno.EFBIG, errno.EOVERFLOW):
        why = "file too large"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        why = "no space left on the device" if code == errno.ENOSPC else "disk quota exceeded"
    else:
        why = exc.strerror or type(exc).__name__
    return InputError(f"{field}: cannot {doing} '{_show(path)}': {why}", field=field, allowed=allowed)


def _show(path: str | Path, limit: int = 120) -> str:
    """A path for a one-line message: control characters escaped, long paths cut in the middle."""
    text = str(path).encode("unicode_escape", "backslashreplace").decode("ascii") \
        if not str(path).isprintable() else str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2 + 3:]}"


def _nonempty(path: str | Path, field: str, allowed: str) -> Path:
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{field}: empty path; give a file name", field=field, allowed=allowed)
    if "\x00" in text:
        raise InputError(f"{field}: the path holds a NUL character", field=field, allowed=allowed)
    return Path(text).expanduser()


def _follow(p: Path, field: str, allowed: str) -> tuple[Path, os.stat_result | None]:
    """(the path a write lands on, its stat or None when it does not exist yet): a symbolic link is
    followed to its final target; a dangling link or a loop is an InputError."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p, None
    except OSError as exc:
        raise os_error(exc, field, p, allowed=allowed) from None
    if not stat.S_ISLNK(st.st_mode):
        return p, st
    try:
        target = Path(os.path.realpath(p, strict=True))
        return target, os.stat(target)
    except FileNotFoundError:
        raise InputError(f"{field}: '{_show(p)}' is a symbolic link to a missing file ('{_show(os.readlink(p))}'); "
                         "give the file or fix the link", field=field, allowed=allowed) from None
    except OSError as exc:
        raise os_error(exc, field, p, allowed=allowed) from None


def _check_parent(parent: Path, field: str, allowed: str) -> None:
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        raise InputError(f"{field}: folder '{_show(parent)}' does not exist", field=field,
                         allowed="an existing folder") from None
    except OSError as exc:
        raise os_error(exc, field, parent, allowed=allowed) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{field}: '{_show(parent)}' is {kind_of(st.st_mode)}, not a folder", field=field,
                         allowed=allowed)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{field}: cannot write in folder '{_show(parent)}' (permission denied)", field=field,
                         allowed=allowed)


def write_target(path: str | Path, field: str) -> Path:
    """The file a write to `path` replaces: `path`, or the final target of a symbolic link. An
    InputError naming `field` (module doc) unless that is a regular file or a new name in a
    writable folder."""
    p = _nonempty(path, field, _ALLOWED_FILE)
    if str(path).endswith(("/", os.sep)):
        raise InputError(f"{field}: '{_show(p)}' names a folder; give a file name", field=field, allowed=_ALLOWED_FILE)
    target, st = _follow(p, field, _ALLOWED_FILE)
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = f"'{_show(p)}' is {kind_of(st.st_mode)}" if target == p else \
            f"'{_show(p)}' links to '{_show(target)}', {kind_of(st.st_mode)}"
        hint = "; give a file name inside it" if stat.S_ISDIR(st.st_mode) else "; gpuplan writes only regular files"
        raise InputError(f"{field}: {what}{hint}", field=field, allowed=_ALLOWED_FILE)
    if len(target.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise InputError(f"{field}: file name longer than {MAX_NAME_BYTES} bytes", field=field,
                         allowed=f"a name of <= {MAX_NAME_BYTES} bytes")
    _check_parent(target.parent, field, _ALLOWED_FILE)
    if st is not None and not os.access(target, os.W_OK):
        raise InputError(f"{field}: cannot write '{_show(target)}' (permission denied)", field=field,
                         allowed=_ALLOWED_FILE)
    return target


#: what a plot may be written as (matplotlib infers the format from the suffix)
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_output_path(path: str | Path, field: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """`path` (as a Path, `~` expanded) if it may be written (module doc) and, when `suffixes` is
    given, ends in one of them; InputError naming `field` otherwise. Call it before any work; the
    writers check again when they write."""
    if suffixes is not None and Path(str(path)).suffix.lower() not in suffixes:
        allowed = ", ".join(suffixes)
        raise InputError(f"{field}: '{_show(path)}' must end in {allowed}", field=field, allowed=allowed)
    write_target(path, field)
    return Path(str(path)).expanduser()


def _file_mode(st: os.stat_result | None) -> int:
    """The mode a plain `open(p, "w")` would give: the existing file's, else 0o666 less the umask
    (mkstemp creates 0o600)."""
    if st is not None:
        return stat.S_IMODE(st.st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path: str | Path, field: str) -> Iterator[Path]:
    """Yield a temporary path next to the file `path` names (same suffix, so writers that infer the
    format from the name work); it replaces that file when the block succeeds and is deleted when
    it fails (module doc)."""
    target = write_target(path, field)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:100]}.",
                                        suffix=f".tmp{target.suffix[:20]}")
        os.close(fd)
    except OSError as exc:
        raise os_error(exc, field, target.parent) from None
    tmp = Path(tmp_name)
    try:
        yield tmp
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):  # replaced by something else meanwhile
            raise InputError(f"{field}: '{_show(target)}' became {kind_of(st.st_mode)} while gpuplan was writing; "
                             "nothing was written", field=field, allowed=_ALLOWED_FILE)
        os.chmod(tmp, _file_mode(st))
        os.replace(tmp, target)
    except OSError as exc:
        raise os_error(exc, field, target) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_atomic(path: str | Path, data: str | bytes, field: str) -> Path:
    """Write `data` (text as UTF-8) to `path` atomically (module doc); returns `path`."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_output(path, field) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(str(path)).expanduser()


def check_output_folder(path: str | Path, field: str) -> Path:
    """`path` if it is a folder (or a link to one) gpuplan may write in, or a name a folder can be
    created at (the nearest existing ancestor is a writable folder); InputError naming `field`
    otherwise (an existing file, device, FIFO or socket is never replaced)."""
    p = _nonempty(path, field, _ALLOWED_FOLDER)
    target, st = _follow(p, field, _ALLOWED_FOLDER)
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"{field}: '{_show(p)}' is {kind_of(st.st_mode)}, not a folder; give a folder "
                             "(it is created when missing)", field=field, allowed=_ALLOWED_FOLDER)
        if not os.access(target, os.W_OK | os.X_OK):
            raise InputError(f"{field}: cannot write in folder '{_show(p)}' (permission denied)", field=field,
                             allowed=_ALLOWED_FOLDER)
        return p
    ancestor = p.absolute().parent
    while True:
        try:
            st = os.stat(ancestor)
            break
        except FileNotFoundError:
            ancestor = ancestor.parent
        except OSError as exc:
            raise os_error(exc, field, p, allowed=_ALLOWED_FOLDER) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{field}: '{_show(ancestor)}' is {kind_of(st.st_mode)}, not a folder", field=field,
                         allowed=_ALLOWED_FOLDER)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{field}: cannot create '{_show(p)}' in '{_show(ancestor)}' (permission denied)",
                         field=field, allowed=_ALLOWED_FOLDER)
    return p


def make_output_folder(path: str | Path, field: str) -> Path:
    """`check_output_folder`, then create the folder (and missing parents); returns the path."""
    p = check_output_folder(path, field)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, field, p, doing="create folder", allowed=_ALLOWED_FOLDER) from None
    return p


def remove_empty_folder(path: str | Path) -> None:
    """Remove `path` if it is an empty folder (a run that failed before writing anything leaves no
    trace); anything else is left alone."""
    with contextlib.suppress(OSError):
        os.rmdir(path)
