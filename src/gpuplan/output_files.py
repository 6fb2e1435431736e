"""Files gpuplan writes (HTML reports, plots, safetensors): checked first, written atomically.

`atomic_output(path, field)` yields a temporary path in the same folder; when the block finishes
the temporary file replaces `path` in one `os.replace` (atomic on POSIX and Windows within one
file system), so an interrupted or failed write never leaves a truncated file behind, and the
temporary file is removed on any error. A path that is a folder, whose folder does not exist, or
that cannot be written is a one-line InputError naming `field` before anything is computed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from gpuplan.errors import InputError

#: longest file name most file systems accept (ext4, APFS, NTFS: 255 bytes)
MAX_NAME_BYTES = 255


def check_output_path(path: str | Path, field: str) -> Path:
    """`path` as a Path if a file can be created there; InputError naming `field` otherwise."""
    text = str(path)
    if not text.strip():
        raise InputError(f"{field}: empty path; give a file name", field=field, allowed="a writable file path")
    p = Path(text).expanduser()
    if p.is_dir() or text.endswith(("/", os.sep)):
        raise InputError(f"{field}: '{p}' is a folder; give a file name inside it", field=field,
                         allowed="a writable file path")
    if len(p.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise InputError(f"{field}: file name longer than {MAX_NAME_BYTES} bytes", field=field,
                         allowed=f"a name of <= {MAX_NAME_BYTES} bytes")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{field}: folder '{parent}' does not exist", field=field, allowed="an existing folder")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"{field}: cannot write '{p}' (permission denied)", field=field, allowed="a writable file path")
    return p


def _file_mode(p: Path) -> int:
    """The mode a plain `open(p, "w")` would give: the existing file's, else 0o666 less the umask
    (mkstemp creates 0o600)."""
    if p.exists():
        return p.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path: str | Path, field: str) -> Iterator[Path]:
    """Yield a temporary path next to `path` (same suffix, so writers that infer the format from
    the name work); rename it onto `path` when the block succeeds, delete it when it fails."""
    p = check_output_path(path, field)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name[:100]}.", suffix=f".tmp{p.suffix}")
        os.close(fd)
    except OSError as exc:
        raise InputError(f"{field}: cannot write in '{p.parent}': {exc.strerror or exc}", field=field,
                         allowed="a writable file path") from None
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _file_mode(p))
        os.replace(tmp, p)
    except OSError as exc:
        raise InputError(f"{field}: cannot write '{p}': {exc.strerror or exc}", field=field) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_atomic(path: str | Path, data: str | bytes, field: str) -> Path:
    """Write `data` (text as UTF-8) to `path` atomically (see atomic_output)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_output(path, field) as tmp:
        tmp.write_bytes(raw)
    return Path(path)
