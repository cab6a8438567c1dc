"""Per-client rate limits of the class routes, in this process's memory: join-code misses
(so codes cannot be guessed by brute force: 10 misses a minute is 14,400 a day against
887 M codes) and classes started. A class behind one school NAT shares an address, so only
misses count against joining, never successful joins. With N processes a client gets N times
the allowance, still hopeless for guessing."""

import threading
import time
from collections import deque


class Window:
    """At most ``limit`` events per ``seconds`` per key (a sliding window)."""

    def __init__(self, limit: int, seconds: float, max_keys: int = 50_000) -> None:
        self.limit, self.seconds, self.max_keys = limit, seconds, max_keys
        self._events: dict[str, deque] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, at: float) -> deque:
        events = self._events.get(key)
        if events is None:
            if len(self._events) >= self.max_keys:  # bounded memory: forget the idle
                for stale in [k for k, v in self._events.items()
                              if not v or v[-1] < at - self.seconds]:
                    del self._events[stale]
                if len(self._events) >= self.max_keys:
                    self._events.clear()
            events = self._events[key] = deque()
        while events and events[0] < at - self.seconds:
            events.popleft()
        return events

    def blocked(self, key: str) -> bool:
        with self._lock:
            return len(self._recent(key, time.monotonic())) >= self.limit

    def hit(self, key: str) -> None:
        with self._lock:
            at = time.monotonic()
            self._recent(key, at).append(at)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


JOIN_MISSES = Window(limit=10, seconds=60)
CLASSES_STARTED = Window(limit=20, seconds=3600)
