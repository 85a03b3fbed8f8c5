"""Sample values shared by the tests of the message, of the client protocol, of the SDK
and of the command line (those of ``tests/client`` and ``tests/cli`` put this folder on
``sys.path`` in their ``conftest``).

One value of each kind, every field set to something other than its default: a message
and the same message as a queue holds it, a queue, the two outgoing queues and the
incoming sequence of a queue manager that peers with others, its status, and what a
trace found. The scripted
daemon of the SDK's and the command line's tests (``tests/client/fake_daemon.py``) answers
with these, so that a value is written once whether a test encodes it or shows it.
"""

from __future__ import annotations

import uuid

from wire import MessageProperties
from wire import client as cf

#: The sample message's source queue manager.
GUID = uuid.UUID("6f1c2e3a-94b1-4c52-9d0e-1234567890ab")

#: A message with every field set to something other than its default.
PROPERTIES = MessageProperties(
    body=b"x" * 100,
    label="l\u00e9",
    destination="DIRECT=OS:.\\private$\\orders",
    correlation_id=bytes(range(20)),
    app_specific=7,
    priority=5,
    delivery=0,
    acknowledge=0x0E,
    journal=2,
    admin_queue=".\\private$\\admin",
    response_queue=".\\private$\\replies",
    time_to_reach_queue=60,
    time_to_be_received=3600,
    message_class=0,
    sent_time=1_700_000_000.25,
    source_qm=GUID,
    ordinal=42,
    transactional=True,
    extension=b"ext",
)

#: The message as a queue holds it.
QUEUED = cf.QueuedMessage(
    queue="orders", lookup_id=9, arrived_time=1_700_000_001.5, message=PROPERTIES
)

#: A queue and its counters.
QUEUE_INFO = cf.QueueInfo(
    name="orders",
    format_name=".\\private$\\orders",
    kind=int(cf.QueueKind.NORMAL),
    transactional=True,
    journal=False,
    quota=1 << 40,
    depth=3,
    bytes=300,
    locked=1,
    created_at=1_600_000_000.0,
)

#: The queue manager that answers (the scripted daemon's).
QM_GUID = uuid.UUID("11111111-2222-4333-8444-555555555555")
#: The queue manager whose messages arrive in the incoming sequence.
SOURCE_QM = uuid.UUID("99999999-8888-4777-8666-555555555555")
ORDERS = "DIRECT=TCP:10.0.0.5:1901\\private$\\orders"
BILLING = "DIRECT=TCP:billing.example:1801\\private$\\invoices"

#: An outgoing queue waiting to retry.
OUTGOING_INFO = cf.OutgoingInfo(
    destination=ORDERS,
    next_hop="10.0.0.9:1801",
    state="waiting",
    next_attempt=1_700_000_100.0,
    waiting=12,
    unacknowledged=3,
    sequence_timestamp=1_700_000_000,
    sequence_ordinal=2,
    next_number=16,
    last_order_ack=None,
    last_error="connection refused",
)
#: A router with one alias and a route through two gates (no destination asked).
ROUTING_INFO = cf.RoutingInfo(
    router=True,
    failover_after=30.0,
    aliases=("gw.example.net:11801",),
    routes=(cf.RouteEntry(key="10.0.0.0/24", hops=("10.0.0.9:1801", "10.0.0.10:1801")),),
    destination="",
    local=False,
    entry="",
    hops=(),
)


def hop_info(hop: str, state: str, *, in_use: bool = False, down_since: float = 0.0) -> cf.HopInfo:
    """One next hop of a routing answer (``last_error`` says why when it is down)."""
    error = "connection refused" if down_since else ""
    return cf.HopInfo(hop=hop, state=state, in_use=in_use, down_since=down_since, last_error=error)


#: An outgoing queue connected.
CONNECTED_INFO = cf.OutgoingInfo(
    destination=BILLING,
    next_hop="billing.example:1801",
    state="connected",
    next_attempt=None,
    waiting=0,
    unacknowledged=1,
    sequence_timestamp=1_690_000_000,
    sequence_ordinal=1,
    next_number=5,
    last_order_ack=1_700_000_050.5,
    last_error="",
)
#: An incoming sequence.
INCOMING_INFO = cf.IncomingInfo(
    source_qm=SOURCE_QM,
    queue="payments",
    sequence_timestamp=1_650_000_000,
    sequence_ordinal=4,
    last_number=41,
    reject_count=2,
    last_access=1_700_000_002.0,
)

#: The status of the queue manager that answers, with the queue, the outgoing queues
#: and the incoming sequence.
STATUS_INFO = cf.StatusInfo(
    qm_name="fake",
    qm_guid=QM_GUID,
    server_version="0.test",
    started_at=1_700_000_000.0,
    connections=2,
    open_transactions=1,
    commits=10,
    aborts=3,
    batches=7,
    uncommitted_bytes=100,
    erasing=0,
    queues=(QUEUE_INFO,),
    outgoing=(OUTGOING_INFO, CONNECTED_INFO),
    incoming=(INCOMING_INFO,),
)

#: What a trace found: the message in a queue, with its last class (NACK_RECEIVE_TIMEOUT).
TRACE_FINDING = cf.TraceFinding(
    kind="queue",
    place="orders",
    time=1.5,
    message_class=0xC002,
    detail="lookup id 3",
    next_hop="10.0.0.5:1801",
)
