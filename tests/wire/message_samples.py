"""A sample message shared by the tests of the message and of the client protocol."""

from __future__ import annotations

import uuid

from wire import MessageProperties

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
