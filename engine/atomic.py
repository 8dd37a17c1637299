"""Write files and folders so that a reader (or a process killed mid-write) sees the old version or the
new one, never a part of either.

A file is written to a unique temporary name in its own folder (a rename is atomic only within one file
system), flushed to disk with fsync, and renamed over the target; the folder is fsynced after so the
rename itself survives a power cut. A folder is built under a temporary name beside the target and then
swapped in: on Linux with `renameat2(RENAME_EXCHANGE)`, one atomic step, and elsewhere by renaming the old
folder aside (`.<name>.old`), renaming the new one in, and deleting the old. If a process dies between those
two renames, `recover_folder` (called before every folder write, and by anyone who reads) puts the old folder
back.

    with atomic_path("x.parquet") as tmp:      # for writers that take a path
        frame.to_parquet(tmp)
    with atomic_file("x.json") as f:           # for writers that take an open file
        json.dump(record, f)
    write_text("x.json", text)
    with replacing_folder(cache / "model-id") as tmp:
        model.save_pretrained(tmp)

Low in the layers on purpose: this module imports nothing from the engine but its errors.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from engine.errors import EngineError

__all__ = ["atomic_file", "atomic_path", "recover_folder", "replace_folder", "replacing_folder", "write_bytes",
           "write_text"]


def _umask() -> int:
    """The process umask, read without changing it (os.umask can only be read by setting it, which races
    with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable; some file systems refuse to fsync a folder, which is harmless."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary path beside `target`; when the block ends without an error, the file there is
    fsynced and renamed over `target` (with the target's old permissions, or the umask's for a new file).
    On an error the temporary file is removed and `target` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if not tmp.is_file():
            raise EngineError(f"nothing was written to the temporary file for {target}")
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()  # what a plain open(..., 'w') would give
        os.chmod(tmp, mode)
        _fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None) -> Iterator[IO]:
    """`open(target, mode)` that replaces `target` only once the block ends without an error."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes a whole file: mode must be 'w' or 'wb', not {mode!r}")
    with atomic_path(target) as tmp:
        if mode == "wb":
            with open(tmp, "wb") as f:
                yield f
        else:
            with open(tmp, "w", encoding=encoding, newline=newline) as f:
                yield f


def write_text(target: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    with atomic_file(target, "w", encoding=encoding, newline="") as f:
        f.write(text)
    return Path(target)


def write_bytes(target: str | os.PathLike, data: bytes) -> Path:
    with atomic_file(target, "wb", encoding=None) as f:
        f.write(data)
    return Path(target)


# -- folders ---------------------------------------------------------------------------------------------

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _renameat2():
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):  # not glibc >= 2.28 (macOS, Windows, musl builds without it)
        return None


_RENAMEAT2 = _renameat2()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step; False where the system or file system cannot."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _aside(target: Path) -> Path:
    return target.with_name(f".{target.name}.old")


def recover_folder(target: str | os.PathLike) -> None:
    """Finish what a killed folder swap left: if `target` is missing but its old version was renamed aside,
    put it back; if both are there, the swap completed and the old copy is deleted."""
    target = Path(target)
    aside = _aside(target)
    if not aside.exists():
        return
    if target.exists():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.rename(aside, target)
        _fsync_dir(target.parent)


def _fsync_tree(folder: Path) -> None:
    for root, _, files in os.walk(folder):
        for name in files:
            _fsync_file(Path(root) / name)
        _fsync_dir(Path(root))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove_leftovers(target: Path) -> None:
    """Delete half-built folders for `target` whose writer process is gone (killed mid-write); a checkpoint's
    can be gigabytes. The writer's pid is in the name, so a write still under way is left alone."""
    for path in target.parent.glob(f".{glob.escape(target.name)}.*.new"):
        pid = path.name[len(target.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def replace_folder(new: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the complete folder `new` (beside `target`, same file system) at `target`, replacing what was there
    without a moment in which `target` holds a part of either: swap, then delete the old one."""
    new, target = Path(new), Path(target)
    recover_folder(target)
    if not target.exists():
        os.rename(new, target)
    elif _exchange(new, target):
        shutil.rmtree(new)  # `new` now holds the old folder
    else:
        aside = _aside(target)
        os.rename(target, aside)
        os.rename(new, target)
        shutil.rmtree(aside, ignore_errors=True)  # a reader's recover_folder may have deleted it first
    _fsync_dir(target.parent)


@contextlib.contextmanager
def replacing_folder(target: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside `target`; when the block ends without an error its files are
    fsynced and it replaces `target` (`replace_folder`). On an error it is deleted and `target` is untouched.
    The temporary folder's name starts with a dot, so listings that skip hidden entries never see it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_folder(target)
    _remove_leftovers(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".new", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0o700; the swapped-in folder gets a plain mkdir's mode
        yield tmp
        _fsync_tree(tmp)
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
