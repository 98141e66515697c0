"""Where a command may write: never over one of its inputs, never over an existing file it was not allowed to
replace, never through a symlink or into a directory, FIFO or device; and always whole or not at all.

An output path is checked before any work starts, so a mistake such as ``syntra export run.db --out run.db``
fails at once with a message naming the clash instead of destroying the run store after the export.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from syntra_dspy.errors import ConfigError


@dataclass(frozen=True)
class Protected:
    """An input that no output may replace: a file, or a folder and everything inside it."""

    label: str
    path: Path

    def covers(self, out: Path) -> bool:
        """True when writing ``out`` would replace this input (or a file inside this folder)."""
        mine = _real(self.path)
        target = _real(out)
        if target == mine or mine in target.parents:
            return True
        try:
            return out.exists() and self.path.exists() and os.path.samefile(out, self.path)  # hard links
        except OSError:
            return False


def _real(path: Path) -> Path:
    """The absolute path with every symlink and ``..`` resolved (the file a write would really reach)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def check_output_file(out: str | Path, *, protected: Iterable[Protected] = (), overwrite: bool = False,
                      field: str = "out") -> Path:
    """Refuse an output that is an input, a symlink, a directory, a FIFO or another special file, or an existing
    file unless ``overwrite``. Returns the path. Nothing is created or changed."""
    out = Path(out)
    for item in protected:
        if item.covers(out):
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


def shown_path(path: object) -> str:
    """A path as the report shows it: relative to the working directory when it lies below it or beside it
    (``../shared/...``), so a report committed with a repository does not name one machine's folders."""
    text = str(path)
    try:
        relative = os.path.relpath(Path(text).resolve(), Path.cwd().resolve())
    except ValueError:  # another drive
        return text
    return relative if Path(relative).parts[:2].count("..") < 2 else text
