"""Power loss for tests: a FUSE pass-through that forgets what was never made durable.

``kill -9`` never tests fsync: the page cache survives it. This file system does not.
Mount it over a backing directory, run a program on it, then *cut the power*: what
the program did not make durable is gone, as after a real power loss.

    cut = PowerCut(tmp / "mnt", tmp / "disk").start()   # python -m herald.testing.powercut
    ...                                                  # a broker works under tmp/mnt
    report = cut.cut()                                   # drops the unsynced state
    cut.start()                                          # the disk as a power cut left it

The model (LazyFS's default for data, POSIX's minimum for names, as ALICE,
PostgreSQL and SQLite assume):

- **Data.** Bytes written to a file since its last ``fsync``/``fdatasync`` live in
  memory only (4 KiB pages over the durable bytes, served to reads); ``fsync`` writes
  them, and the file's size, to the backing file. A truncate or ``fallocate`` is
  likewise durable only at the next ``fsync``. ``close`` makes nothing durable.
- **Names.** A create, rename, unlink, mkdir or rmdir changes only the live namespace
  (in memory); it becomes durable when its directory is fsynced, which makes that
  directory's whole entry list durable (a rename is durable at the new name once the
  new parent is fsynced; the old name goes once the old parent is). A new directory's
  own entries can be made durable before its name is.
- **The disk** is the backing directory, which holds exactly the durable state: every
  durable name is a real entry there, every durable byte is in a real file. Each
  live file is also reached through a hard link ``<backing>/.powercut/f<n>`` (and a
  directory not yet durably named lives at ``.powercut/d<n>``), so a file whose name
  is not yet durable still has a place for its fsynced bytes. A cut is the process
  exiting at once (``SIGUSR1``; ``SIGUSR2``: during the next write, which never
  returns): memory is lost; the next mount deletes
  ``.powercut/`` — inodes no durable name reaches, as a file system check reclaims
  them — and mirrors what is left.

- **A failing disk.** `PowerCut.fail_next_sync` makes the next ``fsync`` or
  ``fdatasync`` of one file fail with ``EIO``, as Linux reports a write-back error
  of a dying disk: that sync makes nothing durable (its bytes stay unsynced, lost
  at a cut unless a later sync writes them). Only that one sync fails.

Not modelled: a cut in the middle of one write (torn pages), reordering among
unsynced writes (they are all dropped, never some), metadata other than size (mode
and times go straight to the backing inode), hard links, symlinks and devices
(refused), and the host's own page cache (the backing directory stands for a disk
that does not lose power). Only one process serves the mount, single-threaded, so
every operation is atomic with respect to a cut.
"""

from __future__ import annotations

import errno
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from herald.testing._powercut_fs import CUT_PREFIX, EIO_PREFIX, READY_PREFIX, CutReport, Dir, Disk, File, fail

__all__ = ["CutReport", "PowerCut", "PowerCutFS", "serve"]

DEADLINE_S = 30.0


def _locked(method: Any) -> Any:
    def run(self: PowerCutFS, *args: Any) -> Any:
        with self.lock:
            return method(self, *args)
    run.__name__ = method.__name__
    return run


class PowerCutFS(Disk):
    """The operations mfusepy calls, by its names and arguments, over a `Disk`."""

    use_ns = True
    flag_nopath = True        # with flag_nullpath_ok: an open file's operations use its handle,
    flag_nullpath_ok = True   # and an unlinked open file has no path (mounted with hard_remove)

    def __init__(self, backing: Path, mount: str = "") -> None:
        super().__init__(backing)
        self.mount = mount

    def init(self, path: str) -> None:
        print(READY_PREFIX + self.mount, flush=True)

    @_locked
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, int]:
        node = self.handles.get(fh or 0) or self.dir_handles.get(fh or 0) or self._lookup(path)
        if isinstance(node, File):
            st = os.fstat(node.fd) if node.fd >= 0 else os.lstat(node.handle)
            sizes = {"st_size": node.size, "st_nlink": node.links, "st_blocks": -(-node.size // 512)}
        else:
            st = os.lstat(self._dir_path(node))
            sizes = {"st_size": st.st_size, "st_blocks": st.st_blocks,
                     "st_nlink": 2 + sum(isinstance(c, Dir) for c in node.entries.values())}
        return {"st_mode": st.st_mode, "st_uid": st.st_uid, "st_gid": st.st_gid,
                "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns, **sizes}

    @_locked
    def opendir(self, path: str) -> int:
        node = self._lookup(path)
        if not isinstance(node, Dir):
            raise fail(errno.ENOTDIR)
        fh = next(self.fhs)
        self.dir_handles[fh] = node
        return fh

    @_locked
    def releasedir(self, path: str | None, fh: int) -> int:
        del self.dir_handles[fh]
        return 0

    @_locked
    def readdir(self, path: str | None, fh: int) -> list[str]:
        return [".", "..", *self.dir_handles[fh].entries]

    @_locked
    def mkdir(self, path: str, mode: int) -> int:
        parent, name = self._parent_of(path)
        if name in parent.entries:
            raise fail(errno.EEXIST)
        store_path = self.store / f"d{next(self.ids)}"
        os.mkdir(store_path, mode & 0o7777)
        node = parent.entries[name] = Dir(store_path, os.lstat(store_path).st_ino, None)
        self._dirs_by_ino[node.backing_ino] = node
        return 0

    @_locked
    def rmdir(self, path: str) -> int:
        parent, name = self._parent_of(path)
        node = parent.entries.get(name)
        if not isinstance(node, Dir):
            raise fail(errno.ENOTDIR if node else errno.ENOENT)
        if node.entries:
            raise fail(errno.ENOTEMPTY)
        del parent.entries[name]
        return 0

    @_locked
    def create(self, path: str, mode: int, flags: int) -> int:
        parent, name = self._parent_of(path)
        node = parent.entries.get(name)
        if node is None:
            handle = self.store / f"f{next(self.ids)}"
            os.close(os.open(handle, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode & 0o7777))
            node = parent.entries[name] = File(handle, os.lstat(handle).st_ino, 0)
            node.links = 1
        elif flags & os.O_EXCL:
            raise fail(errno.EEXIST)
        return self._open(node, flags)

    @_locked
    def open(self, path: str, flags: int) -> int:
        return self._open(self._lookup(path), flags)

    def _open(self, node: File | Dir, flags: int) -> int:
        if isinstance(node, Dir):
            raise fail(errno.EISDIR)
        if flags & os.O_TRUNC:
            node.truncate(0)
        fh = next(self.fhs)
        self.handles[fh] = node
        node.opens += 1
        return fh

    @_locked
    def release(self, path: str | None, fh: int) -> int:
        node = self.handles.pop(fh)
        node.opens -= 1
        self._forget_if_gone(node)
        return 0

    @_locked
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return self.handles[fh].read(offset, size)

    @_locked
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        written = self.handles[fh].write(offset, data)
        if self.armed:  # the power goes during this write: it never returns
            self._cut_now()
        return written

    @_locked
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        node = self.handles.get(fh or 0) or self._lookup(path)
        if isinstance(node, Dir):
            raise fail(errno.EISDIR)
        node.truncate(length)
        return 0

    @_locked
    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode:  # KEEP_SIZE, punching holes…: not needed by Herald
            raise fail(errno.EOPNOTSUPP)
        node = self.handles[fh]
        node.truncate(max(node.size, offset + size))
        return 0

    @_locked
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        node = self.handles[fh]
        if node in self.failing_syncs:
            self.failing_syncs.discard(node)
            raise fail(errno.EIO)
        node.sync()
        return 0

    @_locked
    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        self._make_entries_durable(self.dir_handles[fh])
        return 0

    @_locked
    def unlink(self, path: str) -> int:
        parent, name = self._parent_of(path)
        node = parent.entries.get(name)
        if not isinstance(node, File):
            raise fail(errno.EISDIR if node else errno.ENOENT)
        del parent.entries[name]
        node.links -= 1
        self._forget_if_gone(node)
        return 0

    @_locked
    def rename(self, old: str, new: str) -> int:
        if new.startswith(old.rstrip("/") + "/"):
            raise fail(errno.EINVAL)
        (source, old_name), (target, new_name) = self._parent_of(old), self._parent_of(new)
        node = source.entries.get(old_name)
        if node is None:
            raise fail(errno.ENOENT)
        replaced = target.entries.get(new_name)
        if replaced is node:
            return 0
        if isinstance(replaced, Dir) and (not isinstance(node, Dir) or replaced.entries):
            raise fail(errno.ENOTEMPTY if isinstance(node, Dir) else errno.EISDIR)
        if isinstance(replaced, File) and isinstance(node, Dir):
            raise fail(errno.ENOTDIR)
        del source.entries[old_name]
        target.entries[new_name] = node
        if isinstance(replaced, File):
            replaced.links -= 1
            self._forget_if_gone(replaced)
        return 0

    @_locked
    def chmod(self, path: str | None, mode: int) -> int:
        node = self._lookup(path)
        os.chmod(node.handle if isinstance(node, File) else self._dir_path(node), mode & 0o7777)
        return 0

    @_locked
    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self.backing)
        return {key: getattr(st, key) for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                    "f_files", "f_ffree", "f_favail", "f_namemax")}

    def cut(self) -> None:
        """The power cut: report what is dropped, then exit at once (memory is lost)."""
        with self.lock:
            self._cut_now()

    def arm(self) -> None:
        """Cut the power during the next write, the instant a naive program loses most."""
        with self.lock:
            self.armed = True

    def fail_next_sync(self, path: str) -> None:
        """The next fsync of the file at ``path`` fails with EIO; acknowledged on stdout."""
        with self.lock:
            node = self._lookup(path)
            if not isinstance(node, File):
                raise fail(errno.EISDIR)
            self.failing_syncs.add(node)
        print(EIO_PREFIX + path, flush=True)

    def _cut_now(self) -> None:
        print(self.pending().line(), flush=True)
        os._exit(0)


def serve(mount: str, backing: str) -> None:
    """Mount ``backing`` at ``mount`` until unmounted; ``SIGUSR1`` cuts the power,
    ``SIGUSR2`` cuts it during the next write; a line ``eio <path>`` on stdin makes
    the next fsync of that file fail (`PowerCutFS.fail_next_sync`).

    The FUSE loop runs on a thread so the main thread can take the signal at once."""
    import mfusepy

    class Fuse(mfusepy.FUSE):  # type: ignore[misc]
        def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
            fh = fip.contents.fh if fip else None  # ftruncate of an unlinked file has only its handle
            return self.operations.truncate(None if path is None else path.decode(), length, fh)  # type: ignore[no-any-return]

    fs = PowerCutFS(Path(backing), mount)
    signal.signal(signal.SIGUSR1, lambda signum, frame: fs.cut())
    signal.signal(signal.SIGUSR2, lambda signum, frame: fs.arm())
    loop = threading.Thread(target=Fuse, args=(fs, mount), name="fuse", daemon=True,
                            kwargs={"foreground": True, "nothreads": True, "hard_remove": True,
                                    "fsname": "powercut"})
    loop.start()
    threading.Thread(target=_take_commands, args=(fs,), name="commands", daemon=True).start()
    loop.join()


def _take_commands(fs: PowerCutFS) -> None:
    for line in sys.stdin:
        command, _, path = line.strip().partition(" ")
        try:
            if command != "eio":
                raise fail(errno.EINVAL)
            fs.fail_next_sync(path)
        except OSError as err:  # the test's _expect shows it
            print(f"powercut refused {command} {path}: {err}", flush=True)


class PowerCut:
    """The file system as a child process, for tests: ``start``, ``cut``, ``close``.

    Blocking; every wait has a deadline and fails loudly with the child's stderr."""

    def __init__(self, mount: Path, backing: Path) -> None:
        self.mount, self.backing = Path(mount), Path(backing)
        self.proc: subprocess.Popen[str] | None = None
        self.reports: list[CutReport] = []
        self._lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []

    def start(self) -> PowerCut:
        """Mount, and return once the file system answers."""
        self.mount.mkdir(parents=True, exist_ok=True)
        self.backing.mkdir(parents=True, exist_ok=True)
        self._lines, self._stderr = queue.Queue(), []
        self.proc = proc = subprocess.Popen(
            [sys.executable, "-m", "herald.testing.powercut", str(self.mount), str(self.backing)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        threading.Thread(target=self._read_lines, args=(proc, self._lines), daemon=True).start()
        threading.Thread(target=self._stderr.extend, args=(proc.stderr or (),), daemon=True).start()
        self._expect(READY_PREFIX)
        return self

    def cut(self, *, mid_write: bool = False) -> CutReport:
        """Cut the power: unsynced data and entries are dropped, the mount is gone;
        ``start`` mounts the disk again. At once, or (``mid_write``) during the next
        write anyone makes, which then fails, as every later operation does."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGUSR2 if mid_write else signal.SIGUSR1)
        report = CutReport.parse(self._expect(CUT_PREFIX))
        self.proc.wait(DEADLINE_S)
        self._unmount()
        self.reports.append(report)
        return report

    def fail_next_sync(self, path: Path) -> None:
        """The next ``fsync``/``fdatasync`` of the file at ``path`` (under the mount)
        fails with EIO, as on a failing disk; returns once the file system has it."""
        assert self.proc is not None and self.proc.stdin is not None
        inside = "/" + Path(path).relative_to(self.mount).as_posix()
        self.proc.stdin.write(f"eio {inside}\n")
        self.proc.stdin.flush()
        self._expect(EIO_PREFIX)

    def close(self) -> None:
        """Stop the file system (a cut, unreported) and unmount; idempotent."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait(DEADLINE_S)
            self._unmount(check=False)

    @staticmethod
    def _read_lines(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        for line in proc.stdout or ():
            lines.put(line)

    def _expect(self, prefix: str) -> str:
        try:
            line = self._lines.get(timeout=DEADLINE_S)
        except queue.Empty:
            line = ""
        if not line.startswith(prefix):
            self.close()
            raise RuntimeError(f"powercut at {self.mount}: expected {prefix!r}, got {line!r}\n"
                               + "".join(self._stderr[-30:]))
        return line.strip()

    def _unmount(self, check: bool = True) -> None:
        subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], check=check, capture_output=True,
                       timeout=DEADLINE_S)


if __name__ == "__main__":
    serve(*sys.argv[1:3])
