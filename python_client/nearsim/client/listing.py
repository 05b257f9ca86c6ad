"""The inputs of a load, listed ahead: grouped into worker tasks by a thread
that walks the directories (and, in the loader, asks the database for the
stored hashes of their keys) while the batches are written."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .sources import BytesRead, Decoding, Failure, FileInput, Input, RecordInput

# Work is sent to the workers in tasks of this many documents (fewer for big
# texts); the loader queues a few per worker (loader.QUEUED_TASKS_PER_WORKER):
# enough to keep the workers busy while a batch is being written, and at
# most 64 MiB per worker.
TASK_DOCUMENTS = 64
TASK_BYTES = 4 * 1024 * 1024


def task_size(item: FileInput | RecordInput) -> int:
    if isinstance(item, RecordInput):
        return len(item.text) + (0 if item.attachment is None else len(item.attachment.data))
    return item.size


class Chunk(NamedTuple):
    """Inputs for one worker task, and the bytes read for them (for the progress)."""

    items: list[Any]  # FileInput | RecordInput, then Task once the stored hashes are known
    read: int


def chunks(
    inputs: Iterable[Input], on_failure: Callable[[Failure | Decoding], None], read: BytesRead
) -> Iterator[Chunk]:
    """Inputs grouped into worker tasks; failures found while listing (and the
    encodings of record files) go straight out.

    A chunk's bytes are its files' sizes and the bytes of record files read
    since the previous chunk; what is read after the last one (blank lines,
    bad records) comes in a chunk of no inputs.
    """
    chunk: list[FileInput | RecordInput] = []
    size = files = 0
    counted = read.total
    for item in inputs:
        if isinstance(item, (Failure, Decoding)):
            on_failure(item)
            continue
        chunk.append(item)
        size += task_size(item)
        if isinstance(item, FileInput):
            files += item.size
        if len(chunk) >= TASK_DOCUMENTS or size >= TASK_BYTES:
            yield Chunk(chunk, files + read.total - counted)
            chunk, size, files, counted = [], 0, 0, read.total
    if chunk or read.total > counted:
        yield Chunk(chunk, files + read.total - counted)


class Listing:
    """The items of an iterator, produced ahead by a thread.

    Walking directories and asking the database for stored hashes then
    overlap with writing batches, which waits for the server.  Exceptions
    come out where the items would.
    """

    _END = object()

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(items,), daemon=True,
                                       name="nearsim-listing")  # fmt: skip
        self.thread.start()

    def _produce(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as error:  # handed to the consumer
            self._put(_Raised(error))
        self._put(self._END)

    def _put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Any]:
        while (item := self.queue.get()) is not self._END:
            if isinstance(item, _Raised):
                raise item.error
            yield item

    def close(self) -> None:
        self.stopped.set()
        # It may wait for a line on stdin that never comes; it is a daemon.
        self.thread.join(timeout=5)


@dataclass(frozen=True)
class _Raised:
    error: BaseException
