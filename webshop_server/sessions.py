"""Per-session state of the shop, safe under concurrent requests and bounded in memory.

A session id selects its goal: ``fixed_<n>`` (optionally after a prefix ending in ``_``, e.g.
``env3_fixed_12``, as the original's ``session_prefix``) is goal ``n``; any other valid id gets a
goal chosen by a digest of the id. Because the goal follows from the id and the page state lives
in the URL, any worker of a multi-process server can serve any request of a session.

A session ends when its episode ends (the purchase) or after ``ttl_s`` seconds without a request;
the store also never holds more than ``max_sessions`` sessions (least recently used go first), so
memory stays flat however many episodes are played.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
FIXED_ID = re.compile(r"(?:^|_)fixed_(\d{1,9})$")


@dataclass
class Session:
    """One shopping episode: its goal and when it was last used."""

    session_id: str
    goal_index: int
    last_used: float = field(default_factory=time.monotonic)


def goal_index_for(session_id: str, n_goals: int) -> int | None:
    """The goal a session id selects, or ``None`` when the id is malformed or its goal does not exist."""
    if not SESSION_ID.match(session_id):
        return None
    m = FIXED_ID.search(session_id)
    if m:
        n = int(m.group(1))
        return n if n < n_goals else None
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n_goals


class SessionStore:
    """Thread-safe map session id -> ``Session`` with expiry and a size bound.

    Args:
        n_goals: number of goals session ids select from.
        ttl_s: seconds of inactivity after which a session expires.
        max_sessions: most sessions kept at once.
    """

    def __init__(self, n_goals: int, ttl_s: float = 600.0, max_sessions: int = 100_000) -> None:
        if ttl_s <= 0:
            raise ValueError(f"session ttl_s must be > 0, got {ttl_s}")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.n_goals = n_goals
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def get(self, session_id: str, now: float | None = None) -> Session | None:
        """The session (created when new), or ``None`` when the id selects no goal."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            session = self._sessions.get(session_id)
            if session is None:
                goal_index = goal_index_for(session_id, self.n_goals)
                if goal_index is None:
                    return None
                session = Session(session_id, goal_index, now)
                self._sessions[session_id] = session
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            else:
                session.last_used = now
                self._sessions.move_to_end(session_id)
            return session

    def end(self, session_id: str) -> None:
        """Forgets a session (its episode ended); a later request with the id starts a new episode."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def _expire(self, now: float) -> None:
        # Sessions are kept in last-used order, so expired ones are at the front.
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_used <= self.ttl_s:
                break
            self._sessions.popitem(last=False)
