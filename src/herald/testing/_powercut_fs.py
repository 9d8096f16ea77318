"""The file system behind `herald.testing.powercut`: its model is described there.

`Disk` is the state: a live namespace and unsynced pages in memory, over a backing
directory that holds exactly the durable state. `herald.testing.powercut.PowerCutFS`
adds the operations mfusepy calls.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CUT_PREFIX", "EIO_PREFIX", "READY_PREFIX", "CutReport", "Dir", "Disk", "File", "fail"]

PAGE_BYTES = 4096
STORE_NAME = ".powercut"
READY_PREFIX = "powercut mounted "
CUT_PREFIX = "powercut cut "
EIO_PREFIX = "powercut eio "


class File:
    """A regular file: durable bytes in its backing inode, unsynced pages in memory."""

    def __init__(self, handle: Path, backing_ino: int, size: int) -> None:
        self.handle = handle            # a hard link to the backing inode, in the store
        self.backing_ino = backing_ino
        self.size = size                # live size
        self.durable_size = size        # the backing file's size
        self.valid = size               # backing bytes below this are still the file's
        self.pages: dict[int, bytearray] = {}
        self.unsynced_bytes = 0
        self.links = 0                  # live names
        self.opens = 0
        self.fd = -1

    @property
    def is_dirty(self) -> bool:
        return bool(self.pages) or self.size != self.durable_size or self.valid != self.durable_size

    def _fd(self) -> int:
        if self.fd < 0:
            self.fd = os.open(self.handle, os.O_RDWR)
        return self.fd

    def close_fd(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def _backing(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.valid)
        data = os.pread(self._fd(), end - offset, offset) if end > offset else b""
        return data.ljust(size, b"\0")

    def _page(self, number: int) -> bytearray:
        page = self.pages.get(number)
        if page is None:
            page = self.pages[number] = bytearray(self._backing(number * PAGE_BYTES, PAGE_BYTES))
        return page

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        out = bytearray(self._backing(offset, size))
        for number in range(offset // PAGE_BYTES, -(-(offset + size) // PAGE_BYTES)):
            page = self.pages.get(number)
            if page is not None:
                base = number * PAGE_BYTES
                start, stop = max(offset, base), min(offset + size, base + PAGE_BYTES)
                out[start - offset:stop - offset] = page[start - base:stop - base]
        return bytes(out)

    def write(self, offset: int, data: bytes) -> int:
        done = 0
        while done < len(data):
            number, skip = divmod(offset + done, PAGE_BYTES)
            n = min(PAGE_BYTES - skip, len(data) - done)
            self._page(number)[skip:skip + n] = data[done:done + n]
            done += n
        self.size = max(self.size, offset + len(data))
        self.unsynced_bytes += len(data)
        return len(data)

    def truncate(self, length: int) -> None:
        if length < self.size:
            for number in [n for n in self.pages if n * PAGE_BYTES >= length]:
                del self.pages[number]
            if length % PAGE_BYTES:  # the bytes past the end of the last page read as zeros again
                page = self._page(length // PAGE_BYTES)
                page[length % PAGE_BYTES:] = bytes(PAGE_BYTES - length % PAGE_BYTES)
            self.valid = min(self.valid, length)
        self.size = length

    def sync(self) -> None:
        """Write the unsynced pages and size to the backing file: they are durable now."""
        fd = self._fd()
        if self.valid < self.durable_size:
            os.ftruncate(fd, self.valid)
        for number, page in sorted(self.pages.items()):
            base = number * PAGE_BYTES
            os.pwrite(fd, page[:max(0, min(PAGE_BYTES, self.size - base))], base)
        os.ftruncate(fd, self.size)
        self.pages.clear()
        self.valid = self.durable_size = self.size
        self.unsynced_bytes = 0


class Dir:
    """A directory: its live entries in memory; its durable entries are the backing directory's."""

    def __init__(self, store_path: Path, backing_ino: int, durable_at: tuple[Dir, str] | None) -> None:
        self.entries: dict[str, File | Dir] = {}
        self.store_path = store_path    # where its backing directory is while no durable name has it
        self.backing_ino = backing_ino
        self.durable_at = durable_at    # (parent, name) of its durable name


@dataclass(frozen=True, slots=True)
class CutReport:
    """What a power cut dropped: bytes written but never fsynced (and the files
    holding them), and directory entries whose directory was never fsynced."""

    unsynced_bytes: int
    unsynced_files: int
    unsynced_entries: int

    def line(self) -> str:
        return (f"{CUT_PREFIX}unsynced_bytes={self.unsynced_bytes} unsynced_files={self.unsynced_files} "
                f"unsynced_entries={self.unsynced_entries}")

    @classmethod
    def parse(cls, line: str) -> CutReport:
        fields = dict(part.split("=", 1) for part in line.removeprefix(CUT_PREFIX).split())
        return cls(int(fields["unsynced_bytes"]), int(fields["unsynced_files"]), int(fields["unsynced_entries"]))


def fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class Disk:
    """The live namespace and unsynced pages over the backing directory; blocking.

    ``lock`` keeps a cut out of an operation: hold it around every call."""

    def __init__(self, backing: Path) -> None:
        self.backing = Path(backing).resolve()
        self.store = self.backing / STORE_NAME
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.fhs = itertools.count(1)
        self.handles: dict[int, File] = {}
        self.dir_handles: dict[int, Dir] = {}
        self._dirs_by_ino: dict[int, Dir] = {}
        self.armed = False
        self.failing_syncs: set[File] = set()  # each fails its next fsync with EIO (PowerCut.fail_next_sync)
        shutil.rmtree(self.store, ignore_errors=True)  # orphans of the last mount: never durably named
        self.store.mkdir()
        self.root = self._scan(self.backing, None, {})

    def _scan(self, path: Path, durable_at: tuple[Dir, str] | None, files: dict[int, File]) -> Dir:
        node = Dir(self.store / f"d{next(self.ids)}", os.lstat(path).st_ino, durable_at)
        self._dirs_by_ino[node.backing_ino] = node
        for entry in os.scandir(path):
            if path == self.backing and entry.name == STORE_NAME:
                continue
            if entry.is_dir(follow_symlinks=False):
                node.entries[entry.name] = self._scan(Path(entry.path), (node, entry.name), files)
            elif entry.is_file(follow_symlinks=False):
                found = files.get(entry.inode())
                if found is None:
                    handle = self.store / f"f{next(self.ids)}"
                    os.link(entry.path, handle)
                    found = files[entry.inode()] = File(handle, entry.inode(), entry.stat().st_size)
                found.links += 1
                node.entries[entry.name] = found
            else:
                raise fail(errno.EINVAL)
        return node

    # -- the namespace -------------------------------------------------------------------

    def _dir_path(self, node: Dir) -> Path:
        if node is self.root:
            return self.backing
        if node.durable_at is None:
            return node.store_path
        parent, name = node.durable_at
        return self._dir_path(parent) / name

    def _lookup(self, path: str | None) -> File | Dir:
        if path is None:
            raise fail(errno.ENOENT)
        node: File | Dir = self.root
        for name in filter(None, path.split("/")):
            if not isinstance(node, Dir):
                raise fail(errno.ENOTDIR)
            if (found := node.entries.get(name)) is None:
                raise fail(errno.ENOENT)
            node = found
        return node

    def _parent_of(self, path: str) -> tuple[Dir, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head or "/")
        if not isinstance(parent, Dir):
            raise fail(errno.ENOTDIR)
        if parent is self.root and name == STORE_NAME:
            raise fail(errno.EPERM)
        return parent, name

    def _diff(self, node: Dir) -> tuple[dict[str, tuple[int, bool]], dict[str, File | Dir]]:
        """The durable entries to remove (name: (ino, is dir)) and live ones to add."""
        where = self._dir_path(node)
        durable = {e.name: (e.inode(), e.is_dir(follow_symlinks=False)) for e in os.scandir(where)
                   if not (node is self.root and e.name == STORE_NAME)}
        gone = {name: found for name, found in durable.items()
                if name not in node.entries or node.entries[name].backing_ino != found[0]}
        new = {name: child for name, child in node.entries.items()
               if name not in durable or durable[name][0] != child.backing_ino}
        return gone, new

    def _make_entries_durable(self, node: Dir) -> None:
        where = self._dir_path(node)
        gone, new = self._diff(node)
        for name, (ino, is_dir) in gone.items():
            if is_dir:
                moved = self._dirs_by_ino[ino]
                os.rename(where / name, moved.store_path)
                moved.durable_at = None
            else:
                os.unlink(where / name)
        for name, child in new.items():
            if isinstance(child, Dir):  # also drops its old durable name, if any (as ext4 does)
                os.rename(self._dir_path(child), where / name)
                child.durable_at = (node, name)
            else:
                os.link(child.handle, where / name)

    def _forget_if_gone(self, node: File) -> None:
        if node.opens == 0:
            node.close_fd()
            if node.links == 0:  # unreachable live; a durable name, if any, keeps the inode
                node.pages.clear()
                node.handle.unlink()

    def pending(self) -> CutReport:
        """What a cut now would drop (blocking on the backing directory)."""
        entries, dirty, todo = 0, {id(f): f for f in self.handles.values() if f.is_dirty}, [self.root]
        while todo:
            node = todo.pop()
            gone, new = self._diff(node)
            entries += len(gone.keys() | new.keys())
            for child in node.entries.values():
                if isinstance(child, Dir):
                    todo.append(child)
                elif child.is_dirty:
                    dirty[id(child)] = child
        return CutReport(sum(f.unsynced_bytes for f in dirty.values()), len(dirty), entries)
