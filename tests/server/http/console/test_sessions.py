"""The console's sessions (``console.sessions``), plain state with an explicit
clock: their expiry (idle, lifetime), their bounds (all sessions, one
principal's), and their random ids and CSRF tokens."""

from __future__ import annotations

import pytest

from qmgr.server.http.console.sessions import ConsoleSessions


def test_a_session_ends_after_its_idle_timeout_or_its_lifetime() -> None:
    sessions = ConsoleSessions(idle_timeout=10.0, lifetime=25.0)
    session = sessions.open("alice", "token", now=0.0)
    assert sessions.find(session.session_id, 9.9) is session  # used: its idle time restarts
    assert sessions.find(session.session_id, 19.8) is session
    assert sessions.find(session.session_id, 25.0) is None  # too old, however busy
    assert len(sessions) == 0  # forgotten
    idle = sessions.open("bob", "token", now=100.0)
    assert sessions.find(idle.session_id, 110.0) is None
    assert sessions.find("not-a-session", 0.0) is None
    assert sessions.find(None, 0.0) is None


def test_ids_and_tokens_are_random_and_checked_in_full() -> None:
    sessions = ConsoleSessions(idle_timeout=10.0, lifetime=100.0)
    one, two = sessions.open("a", "token", 0.0), sessions.open("a", "token", 0.0)
    assert len({one.session_id, two.session_id, one.csrf, two.csrf}) == 4
    assert len(one.session_id) >= 43
    assert len(one.csrf) >= 43
    assert one.accepts(one.csrf)
    assert not one.accepts(two.csrf)
    assert not one.accepts("")
    assert not one.accepts(None)
    assert not one.accepts(one.csrf[:-1])


def test_at_the_limit_the_session_idle_the_longest_ends() -> None:
    sessions = ConsoleSessions(idle_timeout=100.0, lifetime=1000.0, limit=3)
    first, second, third = (sessions.open(name, "token", 0.0) for name in "abc")
    assert sessions.find(first.session_id, 1.0) is first  # used: now the newest
    sessions.open("d", "token", 2.0)
    assert len(sessions) == 3
    assert sessions.find(second.session_id, 3.0) is None  # idle the longest: ended
    assert sessions.find(third.session_id, 3.0) is third
    assert sessions.close(third.session_id) is third
    assert sessions.close(third.session_id) is None
    assert sessions.expire(200.0) == 2
    assert len(sessions) == 0


def test_a_session_needs_positive_bounds() -> None:
    with pytest.raises(ValueError, match="positive"):
        ConsoleSessions(idle_timeout=0.0, lifetime=1.0)


def test_one_principal_logging_in_again_and_again_ends_only_its_own_sessions() -> None:
    sessions = ConsoleSessions(idle_timeout=100.0, lifetime=1000.0, per_principal=2)
    other = sessions.open("bob", "token", 0.0)
    for _ in range(10):
        sessions.open("alice", "token", 1.0)
    assert len(sessions) == 3
    assert sessions.find(other.session_id, 2.0) is other


def test_visitors_without_a_principal_end_only_the_oldest_of_all_sessions() -> None:
    # auth.required off: every browser's session is nobody's. A script opening
    # the console again and again does not end the sessions of people at work.
    sessions = ConsoleSessions(idle_timeout=100.0, lifetime=1000.0, limit=50, per_principal=2)
    operator = sessions.open(None, "none", 0.0)
    for _ in range(40):
        sessions.open(None, "none", 1.0)
    assert sessions.find(operator.session_id, 2.0) is operator
    for _ in range(50):  # the bound on all sessions still holds
        sessions.open(None, "none", 3.0)
    assert len(sessions) == 50
    assert sessions.find(operator.session_id, 4.0) is None


def test_a_refresh_does_not_count_as_use() -> None:
    sessions = ConsoleSessions(idle_timeout=10.0, lifetime=1000.0)
    session = sessions.open("alice", "token", 0.0)
    assert sessions.find(session.session_id, 9.0, touch=False) is session
    assert sessions.find(session.session_id, 10.0) is None
