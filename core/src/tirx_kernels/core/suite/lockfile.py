# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Lock files in a folder shared by every user of a host, opened so no one can abuse them.

Every user's suite must see the same GPU locks, so the folder is shared (by default
``<tmp>/tirx-suite-locks``, a fixed name anyone could create first). Hence:

- the folder must be a real directory (not a symlink); one others may write must be
  sticky (like /tmp: no one removes or swaps another's files); one the suite creates is
  made ``1777``, and its lock files ``0666`` whatever the umask, so every user can lock;
- a lock file is opened with ``O_NOFOLLOW`` and must be a regular file: a planted symlink
  or FIFO is refused, never followed or truncated; an existing one is opened without
  ``O_CREAT`` (``fs.protected_regular`` refuses that on other users' files in sticky
  folders) and read-only when it is another user's and not writable (flock needs no write);
- its content (the pid of a holder, for a curious human; it may be stale) is written only
  into a file of this user with a single link.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

FOLDER_MODE = 0o1777
FILE_MODE = 0o666
_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO never hangs


class LockError(Exception):
    """A lock folder or file that cannot be used safely; the message names it and the fix."""


def prepare_folder(folder: Path) -> Path:
    """Create ``folder`` (shared, sticky) or check an existing one; returns it."""
    folder = Path(folder)
    try:
        if not os.path.lexists(folder):
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder, FOLDER_MODE)
            os.chmod(folder, FOLDER_MODE)  # mkdir applies the umask
    except FileExistsError:
        pass  # another suite created it just now
    except OSError as e:
        raise LockError(
            f"cannot create the GPU lock folder {folder}: {e.strerror}; fix: pass "
            "--lock-dir DIR (a folder every suite user can write)"
        ) from None
    try:
        st = os.lstat(folder)
    except OSError as e:
        raise LockError(
            f"cannot use the GPU lock folder {folder}: {e.strerror}; fix: pass --lock-dir DIR"
        ) from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
        raise LockError(
            f"GPU lock folder {folder} is {what}; fix: remove it (the suite "
            "creates the folder itself) or pass --lock-dir DIR"
        )
    mode = stat.S_IMODE(st.st_mode)
    sticky = bool(mode & stat.S_ISVTX)
    if mode & 0o022 and not sticky:
        raise LockError(
            f"GPU lock folder {folder} (mode {mode:04o}) is writable by others but "
            "not sticky: anyone could swap its lock files; fix: chmod 1777 "
            f"{folder} (as its owner) or pass --lock-dir DIR"
        )
    if st.st_uid not in (os.geteuid(), 0) and not sticky:
        raise LockError(
            f"GPU lock folder {folder} belongs to uid {st.st_uid} and is not shared "
            f"(mode {mode:04o}); fix: its owner runs chmod 1777 {folder}, or pass "
            "--lock-dir DIR"
        )
    return folder


def open_lock_file(path: Path) -> int:
    """A file descriptor of the lock file ``path`` (created when missing), ready for flock."""
    path = Path(path)
    fd, created = _open(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LockError(
                f"GPU lock file {path} is not a regular file; fix: remove it or pass --lock-dir DIR"
            )
        if created:
            os.fchmod(fd, FILE_MODE)  # the umask must not lock other users out
    except BaseException:
        os.close(fd)
        raise
    return fd


def note_holder(fd: int) -> None:
    """Write this pid into a held lock file, only when it is this user's and has one link."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_nlink != 1:
        return
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # a read-only descriptor: the note is only a courtesy


def _open(path: Path) -> tuple[int, bool]:
    for _ in range(3):  # a file removed or created between the attempts: try again
        try:
            return _open_existing(path), False
        except FileNotFoundError:
            pass
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _FLAGS, FILE_MODE), True
        except FileExistsError:
            continue
        except OSError as e:
            raise LockError(
                f"cannot create GPU lock file {path}: {e.strerror}; fix: ask the "
                f"owner of {path.parent} to chmod 1777 it, or pass --lock-dir "
                "DIR"
            ) from None
    raise LockError(f"GPU lock file {path} keeps appearing and vanishing; fix: pass --lock-dir DIR")


def _open_existing(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | _FLAGS)
    except PermissionError:
        pass  # another user's file without write permission: flock works read-only
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise LockError(
                f"GPU lock file {path} is a symbolic link (refused: it could point "
                "at anyone's file); fix: remove it, or pass --lock-dir DIR"
            ) from None
        if e.errno == errno.ENOENT:
            raise
        raise LockError(
            f"cannot open GPU lock file {path}: {e.strerror}; fix: remove it, or "
            "pass --lock-dir DIR"
        ) from None
    try:
        return os.open(path, os.O_RDONLY | _FLAGS)
    except OSError as e:
        owner = _owner(path)
        raise LockError(
            f"cannot open GPU lock file {path} ({e.strerror}; owned by {owner}); "
            f"fix: ask {owner} to chmod 666 it, or pass --lock-dir DIR"
        ) from None


def _owner(path: Path) -> str:
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return "another user"
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"
