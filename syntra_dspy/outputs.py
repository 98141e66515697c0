"""Where a command may write: never over one of its inputs, never over an existing file it was not allowed to
replace, never through a symlink or into a directory, FIFO or device; and always whole or not at all.

An output path is checked before any work starts, so a mistake such as ``syntra export run.db --out run.db``
fails at once with a message naming the clash instead of destroying the run store after the export.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError, OutputError, SyntraError


@dataclass(frozen=True)
class Protected:
    """An input that no output may replace: a file, or a folder and everything inside it."""

    label: str
    path: Path
    #: For an input that may have moved since it was recorded: True when an existing file holds the same content
    #: (e.g. the same corpus fingerprint), whatever its path.
    same_content: Callable[[Path], bool] | None = field(default=None, compare=False)

    def covers(self, out: Path) -> bool:
        """True when writing ``out`` would replace this input (or a file inside this folder)."""
        mine = _real(self.path)
        target = _real(out)
        if target == mine or mine in target.parents:
            return True
        try:
            if out.exists() and self.path.exists() and os.path.samefile(out, self.path):  # hard links
                return True
        except OSError:
            pass
        return self.same_content is not None and out.is_file() and self.same_content(out)


def clash(out: str | Path, protected: Iterable[Protected]) -> Protected | None:
    """The first input that writing ``out`` would replace, or None."""
    return next((item for item in protected if item.covers(Path(out))), None)


def _real(path: Path) -> Path:
    """The absolute path with every symlink and ``..`` resolved (the file a write would really reach)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def check_output_file(out: str | Path, *, protected: Iterable[Protected] = (), overwrite: bool = False,
                      field: str = "out") -> Path:
    """Refuse an output that is an input, a symlink, a directory, a FIFO or another special file, or an existing
    file unless ``overwrite``. Returns the path. Nothing is created or changed."""
    out = Path(out)
    item = clash(out, protected)
    if item is not None:
        raise ConfigError(f"this is the {item.label} ({item.path}); refusing to write over it", path=out,
                          field=field, hint="choose another output path")
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise ConfigError(f"cannot check the output path: {exc.strerror}", path=out, field=field) from None
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError("is a symlink; refusing to write through it", path=out, field=field,
                          hint="give the real path of a new file")
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError("is a directory", path=out, field=field, hint="give a file path, e.g. DIR/train.jsonl")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("exists and is not a regular file (a FIFO, socket or device)", path=out, field=field,
                          hint="choose another output path")
    if not overwrite:
        raise ConfigError("already exists", path=out, field=field,
                          hint="pass --overwrite to replace it, or choose another path")
    return out


def atomic_write_text(path: str | Path, text: str, *, mode: int = 0o644) -> Path:
    """Write ``text`` to a temporary file beside ``path``, flush it to disk, then rename it into place: a reader
    or a crash sees the old file or the new one, never half of one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp creates 0600; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def named_output(out: str | Path, *, example: str, field: str = "out") -> Path:
    """Refuse an output path with no file name (``.``, ``..``, ``/``): a sidecar or temporary file is named after
    it, and Python's path methods would fail with a bare ValueError. ``example``: a good value, for the hint."""
    out = Path(out)
    if out.name in ("", ".", ".."):
        raise ConfigError("names a folder, not an output", path=out, field=field,
                          hint=f"give a new name in it, e.g. {example}")
    return out


def check_replaceable_folder(folder: Path, *, marker: str, kind: str, what: str, field: str, hint: str,
                             files: Collection[str] | None = None, required: Collection[str] = ()) -> None:
    """Refuse to replace a folder unless this package wrote it: ``marker`` (a JSON file in it) says ``kind`` and
    has a string at each ``required`` key, and every entry in it is one of ``files`` (by default, the files the
    marker lists). A missing or empty folder is fine. Anything else (a user's folder, a file added to one we
    wrote) is a ConfigError and is left exactly as it was: replacing a folder deletes whatever it holds."""
    if folder.is_symlink():
        raise ConfigError("is a symlink; refusing to replace it", path=folder, field=field, hint=hint)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ConfigError("exists and is not a folder; refusing to replace it", path=folder, field=field, hint=hint)
    names = sorted(p.name for p in folder.iterdir())
    if not names:
        return
    stamp = read_marker(folder / marker)
    listed = stamp.get("files") if stamp is not None and files is None else files
    allowed = {marker, *(n for n in (listed or ()) if isinstance(n, str))}
    foreign = [n for n in names if n not in allowed]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ConfigError(f"is not {what} (it holds {shown}); refusing to delete it", path=folder, field=field,
                          hint=hint)
    if stamp is None or stamp.get("kind") != kind or not all(isinstance(stamp.get(k), str) for k in required):
        raise ConfigError(f"is not {what} (no {kind!r} marker in {marker}); refusing to delete it", path=folder,
                          field=field, hint="if it is an old one, delete it yourself; or " + hint)


def read_marker(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def swap_folder_into_place(tmp: Path, target: Path) -> None:
    """Replace the folder ``target`` with ``tmp`` so a reader sees the old or the new folder, never a mix."""
    if not target.exists():
        os.replace(tmp, target)
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


_FULL = ("no space left on device", "disk quota exceeded", "database or disk is full", "sqlite_full")


def disk_full(exc: BaseException) -> bool:
    """True when ``exc`` (or an error it wraps) says the disk or quota is full, whichever layer noticed: the OS
    (ENOSPC, EDQUOT), SQLite ("database or disk is full"), Arrow or FAISS (their text quotes the OS error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(current).lower() for text in _FULL):
            return True
        current = current.__cause__ or current.__context__
    return False


@contextmanager
def full_disk_is_clear(out: str | Path, *, inputs: str) -> Iterator[None]:
    """Turn a full disk while writing ``out`` into one clear error that names ``out`` and says ``inputs`` (what
    the command only read) are intact, instead of a traceback from the layer that noticed. Outputs here are
    written to a temporary name and renamed, so nothing half-written is left behind."""
    try:
        yield
    except SyntraError:
        raise
    except Exception as exc:
        if not disk_full(exc):
            raise
        raise OutputError(f"the disk is full; could not write this output ({type(exc).__name__}: {exc}). "
                          f"Nothing half-written was left here, and the inputs ({inputs}) were only read: they are "
                          "intact", path=out,
                          hint="free some space (or choose another folder), then rerun the same command") from None


def shown_path(path: object) -> str:
    """A path as the report shows it: relative to the working directory when it lies below it or beside it
    (``../shared/...``), so a report committed with a repository does not name one machine's folders."""
    text = str(path)
    try:
        relative = os.path.relpath(Path(text).resolve(), Path.cwd().resolve())
    except ValueError:  # another drive
        return text
    return relative if Path(relative).parts[:2].count("..") < 2 else text
