"""`BuildCache`: values built on demand once per key, the most recently used kept. A build runs outside the
cache's lock, so a slow or stuck build holds up only the callers that asked for the same key (they share
its result); every other key is looked up or built at once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

from clinrag.core.errors import BuildsBusyError

V = TypeVar("V")


class BuildCache(Generic[V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._built: OrderedDict[Hashable, V] = OrderedDict()
        self._building: dict[Hashable, Future[V]] = {}
        self._lock = threading.Lock()

    def future(
        self, key: Hashable, build: Callable[[], V], start: Callable[[Callable[[], None]], object]
    ) -> Future[V]:
        """The value for `key` as a future: done when it is built already; else the build in progress for
        that key, or a new one handed to `start` (which runs it, in this thread or another). A failed build is
        forgotten, so the next caller tries again."""
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                done: Future[V] = Future()
                done.set_result(self._built[key])
                return done
            pending = self._building.get(key)
            if pending is not None:
                return pending
            pending = self._building[key] = Future()
            pending.set_running_or_notify_cancel()  # a waiter giving up must not cancel it for the others

        def run() -> None:
            try:
                value = build()
            except BaseException as exc:
                with self._lock:
                    del self._building[key]
                pending.set_exception(exc)
                return
            with self._lock:
                del self._building[key]
                self._built[key] = value
                while len(self._built) > self.capacity:
                    self._built.popitem(last=False)
            pending.set_result(value)

        try:
            start(run)
        except BaseException as exc:  # the build could not even start (e.g. its executor is shut down)
            with self._lock:
                self._building.pop(key, None)
            pending.set_exception(exc)
        return pending

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for `key`, built here if no one is building it."""
        return self.future(key, build, lambda run: run()).result()


class BuildPool:
    """Runs builds in daemon threads, `workers` at a time with at most `waiting` more queued behind them
    (beyond that a build is refused with `BuildsBusyError`). Daemon threads, so a build stuck on the network
    never holds up the process's exit."""

    def __init__(self, workers: int, waiting: int) -> None:
        self._running = threading.BoundedSemaphore(workers)
        self._admitted = threading.BoundedSemaphore(workers + waiting)

    def submit(self, run: Callable[[], None]) -> None:
        if not self._admitted.acquire(blocking=False):
            raise BuildsBusyError("too many methods are being built at once: try again shortly")

        def target() -> None:
            try:
                with self._running:
                    run()
            finally:
                self._admitted.release()

        threading.Thread(target=target, name="clinrag-build", daemon=True).start()
