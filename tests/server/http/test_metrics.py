"""The collector (``metrics``) without sockets: a real store and core, the
daemon's other parts stood in for; every family read back through the
exposition and ``prometheus_client``'s parser."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import trio
from metrics_kit import Committer, Peering, outgoing_info, sources_of
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import storage
from qmgr import __version__
from qmgr.core.engine import QueueManagerCore
from qmgr.server.client.authorization import AccessTally
from qmgr.server.http.exposition import Exposition
from qmgr.server.http.metrics import QueueManagerCollector, class_name
from qmgr.server.http.sources import MetricsSources
from wire import MessageClass, MessageProperties

NOW = 1_700_000_000.0
OUTGOING = "outgoing$;tcp:10.0.0.5:1801\\orders"


def write(store: storage.Store, *ops: storage.Operation, now: float = NOW) -> None:
    [outcome] = store.commit([storage.Unit(ops)], now=now)
    assert outcome.error is None, outcome.error


def scrape(collector: QueueManagerCollector, accept: str = "") -> dict[str, dict[str, float]]:
    """Every sample of a scrape, by family and by its labels' text."""
    registry = CollectorRegistry()
    registry.register(collector)
    body, content_type = trio.run(Exposition(registry, collector).scrape, accept)
    assert content_type.startswith("text/plain")
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def test_every_family_reads_what_the_daemon_counts(store: storage.Store, tmp_path: Path) -> None:
    core = QueueManagerCore(store)
    for unit in core.queues.system_queue_units(NOW):
        write(store, *unit.ops)
    record = core.queues.created(store.commit([core.queues.create("Orders", wall=NOW)], now=NOW)[0])
    orders = record.queue_id
    for offset in (0.0, 5.0, 10.0):
        write(store, storage.AppendMessage(orders, b"body", 0, 4), now=NOW + offset)
    write(store, storage.RemoveMessage(orders, 1), now=NOW + 11)
    core.holds.hold(orders, 2)
    # Dead letters as the core writes them: counted by class as they commit.
    message = MessageProperties(body=b"late", destination="DIRECT=OS:.\\private$\\orders")
    for dead_class in (MessageClass.NACK_RECEIVE_TIMEOUT, MessageClass.NACK_RECEIVE_TIMEOUT):
        write(store, core.outcomes.dead_letter(message, dead_class))
    write(store, storage.AppendOutgoing(OUTGOING, OUTGOING, b"entry", 5), now=NOW + 20)
    # FinalAcks waiting for their way back: two of ours, one passed on for a peer.
    for ordinal, sender in ((1, None), (2, None), (1, b"\x0b" * 16)):
        write(store, storage.RecordFinalAck(b"\x0a" * 16, ordinal, b"ack", stamp=7, sender=sender))
    outgoing = store.get_queue(OUTGOING)
    assert outgoing is not None
    core.tally.commits, core.tally.aborts = 12, 3
    tally = AccessTally(denied=4, authentication_failures=2)
    sources = MetricsSources(
        name="qm-a",
        version=__version__,
        store=store,
        core=core,
        committer=Committer(),
        tally=tally,
        peering=Peering([(outgoing.queue_id, outgoing_info("waiting", 1, 2))]),
        connections=lambda: {"client": 3, "peer": 1, "http": 1},
        data_dir=tmp_path,
        wall=lambda: NOW + 100,
        disk_free=lambda path: 1_000_000,
    )
    found = scrape(QueueManagerCollector(sources))

    queue = "queue=orders"
    assert found["qmgr_queue_messages"][queue] == 2
    assert found["qmgr_queue_bytes"][queue] == 8
    assert found["qmgr_queue_locked_messages"][queue] == 1
    # The first visible message arrived at NOW + 5 (the one of NOW was received).
    assert found["qmgr_queue_oldest_message_age_seconds"][queue] == 95
    assert found["qmgr_queue_messages_added_total"][queue] == 3
    assert found["qmgr_queue_messages_removed_total"][queue] == 1
    # Journals, subqueues and system queues have their series; outgoing queues do not.
    assert set(found["qmgr_queue_messages"]) == {
        "queue=orders",
        "queue=orders;journal",
        "queue=orders;poison",
        "queue=orders;retry",
        "queue=system$;deadletter",
        "queue=system$;deadxact",
        "queue=system$;journal",
    }
    assert found["qmgr_queue_oldest_message_age_seconds"]["queue=orders;retry"] == 0
    assert found["qmgr_queue_messages_added_total"]["queue=system$;deadletter"] == 2
    dead = found["qmgr_dead_letters_total"]
    assert dead["class=NACK_RECEIVE_TIMEOUT,queue=system$;deadletter"] == 2
    # Every class of both system dead-letter queues is there from the start, at 0, so
    # that Prometheus's increase() sees the first dead letter after a start.
    nacks = [c.name for c in MessageClass if c.name.startswith("NACK_")]
    assert len(dead) == 2 * len(nacks)
    assert sum(dead.values()) == 2
    assert dead["class=NACK_BAD_DST_Q,queue=system$;deadxact"] == 0
    assert found["qmgr_commits_total"][""] == 12
    assert found["qmgr_aborts_total"][""] == 3
    assert found["qmgr_synced_writes_total"][""] == 7
    assert found["qmgr_sync_seconds_bucket"] == {"le=0.001": 2, "le=0.01": 3, "le=+Inf": 4}
    assert found["qmgr_sync_seconds_count"][""] == 4
    assert found["qmgr_sync_seconds_sum"][""] == pytest.approx(0.5035)
    assert found["qmgr_connections"] == {"kind=client": 3, "kind=http": 1, "kind=peer": 1}
    assert found["qmgr_open_transactions"][""] == 0
    assert found["qmgr_prepared_transactions"][""] == 0
    assert found["qmgr_prepared_transaction_oldest_age_seconds"][""] == 0
    assert found["qmgr_uncommitted_bytes"][""] == 0
    hop = "destination=DIRECT=TCP:10.0.0.5\\private$\\orders,next_hop=10.0.0.5:1801"
    assert found["qmgr_outgoing_messages"] == {hop: 3}
    assert found["qmgr_outgoing_unacknowledged_messages"] == {hop: 2}
    assert found["qmgr_outgoing_oldest_message_age_seconds"] == {hop: 80}
    assert found["qmgr_peer_link_up"] == {hop: 0}
    rejected = found["qmgr_incoming_rejected_total"]
    assert (rejected["class=NACK_ACCESS_DENIED"], rejected["class=NACK_BAD_DST_Q"]) == (1, 2)
    assert sum(rejected.values()) == 3  # the other classes at 0
    assert found["qmgr_incoming_rejected_not_kept_total"][""] == 1
    assert found["qmgr_acknowledgments_dropped_total"][""] == 3
    assert found["qmgr_relayed_resends_dropped_total"][""] == 5
    assert found["qmgr_final_acks_waiting"][""] == 3
    assert found["qmgr_access_denied_total"][""] == 4
    assert found["qmgr_authentication_failures_total"][""] == 2
    usage = store.usage()
    assert found["qmgr_store_used_bytes"][""] == usage.used_bytes
    assert found["qmgr_store_limit_bytes"][""] == usage.file_bytes + 1_000_000
    assert found["qmgr_disk_free_bytes"][""] == 1_000_000
    guid = str(store.qm_guid)
    assert found["qmgr_build_info"] == {f"guid={guid},name=qm-a,version={__version__}": 1}
    # The process collector is not the collector's: the daemon registers it beside.
    assert not any(name.startswith("process_") for name in found)


def test_a_connected_link_is_up_and_an_unknown_class_is_named_in_hex(
    store: storage.Store, tmp_path: Path
) -> None:
    assert class_name(MessageClass.NACK_Q_EXCEED_QUOTA) == "NACK_Q_EXCEED_QUOTA"
    assert class_name(0x8FFF) == "0x8fff"
    sources = sources_of(store, tmp_path, outgoing=[(999, outgoing_info("connected", 0, 0))])
    found = scrape(QueueManagerCollector(sources))
    assert list(found["qmgr_peer_link_up"].values()) == [1]
    # No stored outgoing queue behind it (purged and forgotten): nothing is old.
    assert list(found["qmgr_outgoing_oldest_message_age_seconds"].values()) == [0]
    assert found["qmgr_disk_free_bytes"][""] > 0  # the real file system's


def test_a_paused_queue_says_so_and_its_link_is_its_session_s(
    store: storage.Store, tmp_path: Path
) -> None:
    # Paused by an operator: its session with the next hop may still be open
    # (the link is up), and the alert on a link down leaves it out.
    outgoing = [(998, outgoing_info("paused", 3, 0))]
    for linked, up in ((frozenset({998}), 1), (frozenset(), 0)):
        sources = sources_of(store, tmp_path, outgoing=outgoing, linked=linked)
        found = scrape(QueueManagerCollector(sources))
        assert list(found["qmgr_peer_link_up"].values()) == [up]
        assert list(found["qmgr_outgoing_paused"].values()) == [1]
    running = sources_of(store, tmp_path, outgoing=[(999, outgoing_info("connected", 1, 0))])
    assert list(scrape(QueueManagerCollector(running))["qmgr_outgoing_paused"].values()) == [0]


def test_copies_awaiting_confirmation_are_counted_on_their_outgoing_queue(
    store: storage.Store, tmp_path: Path
) -> None:
    name = "outgoing$;tcp:10.0.0.5:1801\\orders"
    [outcome] = store.commit(
        [storage.Unit((storage.AppendOutgoing(name, "orders", b"held", 4),))], now=0.0
    )
    assert outcome.error is None
    [queue_id] = [q.queue_id for q in store.list_queues() if q.name == name]

    def kept(ordinal: int, deadline: float | None) -> storage.Unit:
        copy = storage.Confirmation(ordinal, 0, True, 0, deadline, name, b"message")
        return storage.Unit((storage.AddConfirmation(copy),))

    sources = sources_of(store, tmp_path, outgoing=[(queue_id, outgoing_info("connected", 0, 0))])
    found = scrape(QueueManagerCollector(sources))
    assert list(found["qmgr_outgoing_awaiting_confirmation"].values()) == [0]
    # Copies with a deadline count; one without (nothing can time it out) does not.
    store.commit([kept(7, 2e9), kept(8, 2e9), kept(9, None)], now=0.0)
    found = scrape(QueueManagerCollector(sources))
    assert list(found["qmgr_outgoing_awaiting_confirmation"].values()) == [2]


def test_a_queue_with_a_limit_reports_it(tmp_path: Path) -> None:
    limited = storage.Store(
        tmp_path / "limited", initial_map_size=1 << 20, max_map_size=8 << 20, durable=False
    )
    with limited:
        sources = sources_of(limited, tmp_path)
        found = scrape(QueueManagerCollector(sources))
        assert found["qmgr_store_limit_bytes"][""] == limited.usage().limit_bytes


def test_a_map_limit_past_what_the_disk_holds_reports_the_disk(tmp_path: Path) -> None:
    # The disk fills before the map: the limit is what the file can still grow
    # to, so that used / limit (the QmgrStoreNearlyFull alert) reaches 1.
    limited = storage.Store(
        tmp_path / "limited", initial_map_size=1 << 20, max_map_size=1 << 30, durable=False
    )
    with limited:
        usage = limited.usage()
        sources = dataclasses.replace(sources_of(limited, tmp_path), disk_free=lambda _: 0)
        found = scrape(QueueManagerCollector(sources))
        assert found["qmgr_store_limit_bytes"][""] == usage.file_bytes
        assert found["qmgr_store_used_bytes"][""] / found["qmgr_store_limit_bytes"][""] > 0.85


def test_the_queues_series_follow_queues_created_and_deleted(
    store: storage.Store, tmp_path: Path
) -> None:
    core = QueueManagerCore(store)
    write(store, storage.CreateQueue("a%s", "A%s", transactional=False, created_at=NOW))
    sources = sources_of(store, tmp_path, core=core)
    collector = QueueManagerCollector(sources)
    # A name with a % in it is text like any other (each queue comes with its journal).
    assert scrape(collector)["qmgr_queue_messages"] == {"queue=a%s": 0, "queue=a%s;journal": 0}
    write(store, storage.CreateQueue("b", "b", transactional=False, created_at=NOW))
    a = store.get_queue("a%s")
    assert a is not None
    write(store, storage.AppendMessage(a.queue_id, b"x", 0, 1))
    assert scrape(collector)["qmgr_queue_messages"] == {
        "queue=a%s": 1,
        "queue=a%s;journal": 0,
        "queue=b": 0,
        "queue=b;journal": 0,
    }
    write(store, storage.DeleteQueue(a.queue_id))
    assert scrape(collector)["qmgr_queue_messages"] == {"queue=b": 0, "queue=b;journal": 0}


def test_log_lines_that_could_not_be_written_are_counted(
    store: storage.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [0]
    sources = dataclasses.replace(
        sources_of(store, tmp_path), log_write_failures=lambda: failures[0]
    )
    collector = QueueManagerCollector(sources)
    assert scrape(collector)["qmgr_log_write_failures_total"][""] == 0
    failures[0] = 5  # the disk holding the log filled up
    assert scrape(collector)["qmgr_log_write_failures_total"][""] == 5
