"""Queue permissions applied to requests, without a session: each kind of need, the send
rule with its kept answers, the preparer rule, what a trace shows, peers, and the lists
(whose queue's, unreadable ones, changes)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.permissions import ACL_SETTING_PREFIX, Principal, Right
from qmgr.core.tokens import TokenBook, hash_token
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.handlers import REQUESTS
from qmgr.server.client.needs import ADMINISTRATORS, MONITORS, OPEN, QueueRight
from storage import QueueKind, Store
from wire import MessageProperties
from wire import client as cf

ALICE = Principal("alice", frozenset())
BOB = Principal("bob", frozenset())
ROOT = Principal("root", frozenset())


@pytest.fixture
def core(tmp_path: Path) -> Iterator[QueueManagerCore]:
    store = Store(tmp_path / "s", initial_map_size=1 << 22, durable=False)
    engine = QueueManagerCore(store)
    store.commit(engine.queues.system_queue_units(time.time()), now=time.time())
    try:
        yield engine
    finally:
        store.close()


@pytest.fixture
def authorization(core: QueueManagerCore) -> Authorization:
    """Permissions on: root administers, carol is in ops, a queue's list is its
    creator's; queues ``mine`` (alice's) and ``shared`` (alice's, bob may send)."""
    checks = Authorization(
        core,
        enabled=True,
        admins=frozenset({"root", "group:wheel"}),
        groups={"ops": frozenset({"carol"})},
        default_acl={},
        tokens=TokenBook({"alice": hash_token("secret")}),
    )
    for name in ("mine", "shared"):
        create(core, checks, name, ALICE)
    _, bob_sends = checks.changed_acl(core.queue("shared"), "bob", Right.SEND, Right.NONE)
    write(core, checks, bob_sends)
    return checks


def create(core: QueueManagerCore, checks: Authorization, name: str, creator: Principal) -> None:
    unit = core.queues.create(name, journal=True, wall=1.0)
    acl = checks.new_queue_acl(unit.ops[0].name, creator)  # type: ignore[attr-defined]
    [outcome] = core.store.commit([storage.Unit((*unit.ops, acl))], now=1.0)
    core.queues.created(outcome)
    checks.written(acl)


def write(core: QueueManagerCore, checks: Authorization, setting: storage.SetSetting) -> None:
    [outcome] = core.store.commit([storage.Unit((setting,))], now=1.0)
    assert outcome.error is None
    checks.written(setting)


def denial(checks: Authorization, principal: Principal | None, request: object) -> str | None:
    """What the session asks: with the need the request table declares."""
    return checks.denial(principal, request, REQUESTS[type(request)].need)


def send(destination: str, **fields: str) -> cf.Send:
    return cf.Send(message=MessageProperties(destination=destination, body=b"x", **fields))


def test_nothing_is_checked_when_disabled_for_nobody_or_for_an_administrator(
    authorization: Authorization,
) -> None:
    purge = cf.PurgeQueue(name="mine")
    assert denial(authorization, BOB, purge) is not None
    assert denial(authorization, None, purge) is None
    assert denial(authorization, ROOT, purge) is None
    assert denial(authorization, Principal("dave", frozenset({"group:wheel"})), purge) is None
    authorization.enabled = False
    assert denial(authorization, BOB, purge) is None


def test_open_requests_and_administrators_only(authorization: Authorization) -> None:
    assert authorization.denial(BOB, cf.ListQueues(), OPEN) is None
    assert denial(authorization, BOB, cf.CreateQueue(name="new")) is None
    refused = authorization.denial(
        BOB, cf.ControlOutgoing(action=1, destination="d"), ADMINISTRATORS
    )
    assert refused == "'bob' is not an administrator (auth.admins)"


def test_the_metrics_are_for_monitors_and_administrators(core: QueueManagerCore) -> None:
    checks = Authorization(
        core,
        enabled=True,
        admins=frozenset({"root"}),
        groups={"watch": frozenset({"prom"})},
        default_acl={},
        monitors=frozenset({"grafana", "group:watch"}),
    )
    for allowed in ("grafana", "prom", "root"):  # named, through a group, an administrator
        assert checks.denial(checks.principal(allowed), None, MONITORS) is None
    refused = checks.denial(checks.principal("bob"), None, MONITORS)
    assert refused == (
        "'bob' may not read the metrics: it is neither in auth.monitors nor an "
        "administrator (auth.admins)"
    )


def test_a_queue_right_on_the_queue_the_request_names(authorization: Authorization) -> None:
    refused = denial(authorization, BOB, cf.Receive(queue="mine"))
    assert refused is not None
    assert refused == "'bob' may not receive on queue 'mine' (.\\private$\\mine)"
    peeked = denial(authorization, BOB, cf.Receive(queue="mine", peek=True))
    assert peeked is not None
    assert "may not peek on queue 'mine'" in peeked
    assert (
        denial(authorization, ALICE, cf.MoveMessages(source="mine;poison", target="mine")) is None
    )
    moved = denial(authorization, BOB, cf.MoveMessages(source="mine;poison", target="mine"))
    assert moved is not None
    assert "'mine;poison'" in moved  # a subqueue has its queue's list
    # An unknown queue is the handler's to report.
    assert denial(authorization, BOB, cf.PurgeQueue(name="nowhere")) is None


def test_a_need_that_is_not_one_is_an_error(authorization: Authorization) -> None:
    with pytest.raises(AssertionError):
        authorization.denial(BOB, cf.ListQueues(), Right.SEND)  # type: ignore[arg-type]


def test_a_send_needs_send_on_every_queue_it_puts_a_copy_in_or_names(
    authorization: Authorization,
) -> None:
    assert denial(authorization, BOB, send("shared")) is None
    mine = denial(authorization, BOB, send("shared,mine"))
    assert mine is not None
    assert "may not send on queue 'mine'" in mine
    for role in ("admin", "response"):
        named = denial(authorization, BOB, send("shared", **{f"{role}_queue": "mine"}))
        assert named is not None
        assert named.endswith(f", named as the {role} queue")
    # Remote queues and bad names are not this queue manager's to judge here.
    assert denial(authorization, BOB, send("DIRECT=TCP:10.0.0.9\\private$\\x")) is None
    assert denial(authorization, BOB, send("bad\\\\name")) is None


def test_a_local_admin_queue_must_exist_when_a_send_names_it(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    # Nothing could be checked, and whoever created it later would get the acknowledgments.
    for admin in ("later", "DIRECT=OS:.\\private$\\later"):
        named = denial(authorization, BOB, send("shared", admin_queue=admin))
        assert named is not None
        assert named.startswith(f"the admin queue '{admin}' does not exist")  # as typed
    # A response queue is never written by the queue manager itself.
    assert denial(authorization, BOB, send("shared", response_queue="later")) is None
    # A queue nobody may send to cannot be named as either, one's own journal included.
    create(core, authorization, "bobs", BOB)
    for role in ("admin", "response"):
        for name in ("mine;journal", "bobs;journal", "system$;deadletter", "mine;poison"):
            named = denial(authorization, BOB, send("shared", **{f"{role}_queue": name}))
            assert named is not None, (role, name)
            assert named.endswith(f", named as the {role} queue"), named
    # Several queues or a list: the send reports the name, not a right.
    assert denial(authorization, BOB, send("shared", admin_queue="DL=somelist")) is None
    assert denial(authorization, BOB, send("shared", admin_queue="mine,shared")) is None


def test_an_answer_for_a_send_is_kept_until_a_list_changes(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    assert denial(authorization, BOB, send("mine")) is not None
    assert (BOB, "mine", "", "") in authorization._sends
    _, grant = authorization.changed_acl(core.queue("mine"), "bob", Right.SEND, Right.NONE)
    write(core, authorization, grant)
    assert authorization._sends == {}
    assert denial(authorization, BOB, send("mine")) is None
    assert denial(authorization, BOB, send("mine,shared")) is None
    assert (BOB, "mine,shared", "", "") not in authorization._sends  # not one queue


@pytest.mark.parametrize("first", ["in-group", "token"])
def test_a_kept_answer_is_one_principals_groups_and_all(
    core: QueueManagerCore, authorization: Authorization, first: str
) -> None:
    """A local user of the Unix socket and a client authenticated under the same
    name are in different groups: the answer for one is not the other's."""
    _, grant = authorization.changed_acl(
        core.queue("mine"), "group:nogroup", Right.SEND, Right.NONE
    )
    write(core, authorization, grant)
    in_group = authorization.principal("nobody", frozenset({"group:nogroup"}))
    token = authorization.principal("nobody")
    order = [in_group, token] if first == "in-group" else [token, in_group]
    answers = {p: denial(authorization, p, send("mine")) for p in order}
    assert answers[in_group] is None
    assert answers[token] is not None


def test_a_kept_answer_for_a_send_goes_with_a_deleted_queue(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    """An admin queue must exist when a send names it: once it is deleted, the send
    that named it is refused again, not let through on an answer kept from before."""
    create(core, authorization, "acks", BOB)
    assert denial(authorization, BOB, send("shared", admin_queue="acks")) is None
    record, unit = core.queues.delete("acks")
    [outcome] = core.store.commit([unit], now=1.0)
    core.queues.deleted(outcome)
    authorization.deleted(record)
    refused = denial(authorization, BOB, send("shared", admin_queue="acks"))
    assert refused is not None
    assert refused.startswith("the admin queue 'acks' does not exist")


def test_a_prepared_transaction_is_resolved_by_its_preparer(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    ops = (
        storage.PrepareTransaction("x1", (), (), created_at=1.0, owner="alice"),
        storage.RecordOutcome("x2", committed=True, resolved_at=1.0, owner="alice"),
    )
    core.store.commit([storage.Unit(ops)], now=1.0)
    for xids in (("x1",), ("x2",), ("unknown", "x1")):
        assert denial(authorization, ALICE, cf.Resolve(commit=True, xids=xids)) is None
        refused = denial(authorization, BOB, cf.Resolve(commit=True, xids=xids))
        assert refused is not None
        assert "only the principal that prepared it and administrators may" in refused
    assert denial(authorization, BOB, cf.Resolve(commit=False, xids=("unknown",))) is None
    assert authorization.owner_filter(BOB) == "bob"
    assert authorization.owner_filter(ROOT) is None
    assert authorization.owner_filter(None) is None


def test_a_trace_shows_the_queues_a_principal_may_peek(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    assert authorization.traceable(ROOT) is None
    visible = authorization.traceable(BOB)
    assert visible is not None
    assert not visible(core.queue("mine"))
    _, grant = authorization.changed_acl(core.queue("mine"), "bob", Right.PEEK, Right.NONE)
    write(core, authorization, grant)
    assert visible(core.queue("mine"))
    assert visible(core.queue("mine;journal"))  # a journal has its queue's list
    outgoing = [q for q in core.queues.all() if q.kind is QueueKind.OUTGOING]
    assert outgoing == []  # none here; an outgoing queue is never traceable by a client


def test_principals_groups_and_tokens(authorization: Authorization) -> None:
    carol = authorization.principal("carol", frozenset({"group:staff"}))
    assert carol.names() >= {"carol", "group:ops", "group:staff"}
    assert authorization.authenticate("secret") == "alice"
    assert authorization.authenticate("wrong") is None


def test_a_peer_needs_send_on_the_queue_it_delivers_to(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    refuses = authorization.refuses_peer("qm2")
    assert refuses(core.queue("mine"))
    _, grant = authorization.changed_acl(core.queue("mine"), "peer:qm2", Right.SEND, Right.NONE)
    write(core, authorization, grant)
    assert not refuses(core.queue("mine"))
    assert authorization.refuses_peer(None)(core.queue("mine"))  # peer:anonymous


def test_a_client_not_known_has_only_the_rights_of_everyone(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    """What comes back over a session with itself from one of this queue manager's
    clients: not judged as a peer (``peer:*``), not as an administrator."""
    refuses = authorization.refuses_unknown_client()
    for entry in ("peer:*", "peer:anonymous", "root"):
        _, grant = authorization.changed_acl(core.queue("mine"), entry, Right.SEND, Right.NONE)
        write(core, authorization, grant)
        assert refuses(core.queue("mine")), entry
    _, grant = authorization.changed_acl(core.queue("mine"), "everyone", Right.SEND, Right.NONE)
    write(core, authorization, grant)
    assert not refuses(core.queue("mine"))


def test_an_acknowledgment_is_written_with_the_rights_of_its_source(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    source = uuid.UUID(int=7)
    message = MessageProperties(source_qm=source)
    assert authorization.refuses_acknowledgment(message, core.queue("mine"))
    authorization.identities_of = lambda guid: frozenset({"qm7"}) if guid == source else frozenset()
    _, grant = authorization.changed_acl(core.queue("mine"), "peer:qm7", Right.SEND, Right.NONE)
    write(core, authorization, grant)
    assert not authorization.refuses_acknowledgment(message, core.queue("mine"))
    authorization.enabled = False
    assert not authorization.refuses_acknowledgment(message, core.queue("shared"))


def test_an_unreadable_stored_list_leaves_the_queue_to_administrators(
    core: QueueManagerCore, tmp_path: Path
) -> None:
    checks = Authorization(
        core,
        enabled=True,
        admins=frozenset({"root"}),
        groups={},
        default_acl={"everyone": ["send"]},  # what must not apply to a damaged list
    )
    create(core, checks, "q", ROOT)
    assert denial(checks, BOB, send("q")) is None
    core.store.commit(
        [storage.Unit((storage.SetSetting(ACL_SETTING_PREFIX + "q", "junk"),))], now=0
    )
    checks._lists.clear()  # as after a restart
    checks._sends.clear()
    assert denial(checks, BOB, send("q")) is not None
    assert denial(checks, ROOT, send("q")) is None


def test_a_change_that_leaves_an_entry_no_rights_removes_it(
    core: QueueManagerCore, authorization: Authorization
) -> None:
    acl, _ = authorization.changed_acl(core.queue("shared"), "bob", Right.NONE, Right.FULL)
    assert "bob" not in acl.entries
    granted, _ = authorization.changed_acl(
        core.queue("shared"), "group:ops", Right.RECEIVE, Right.NONE
    )
    assert granted.entries["group:ops"] == Right.RECEIVE
    assert QueueRight("queue", Right.RECEIVE).of(cf.Receive(queue="shared"))[0] == "shared"
