"""The daemon's background workers: its own work, in steps, written like a client's.

Theory of operation
-------------------
Every worker is a :class:`~.worker.Worker`: a loop that calls its step,
writes what the step decided through the committer (as the daemon's own
work, sharing the clients' batches and never written inline), hands each
outcome back to the core, wakes the readers of the queues that changed,
and pauses until the next deadline or a wake-up; it stops when the
committer has stopped. ``worker`` holds that skeleton once; each module
here holds only its worker's decisions:

=====================  ===================================================
module                 worker
=====================  ===================================================
``worker``             the skeleton: :class:`~.worker.Worker` (the loop,
                       wake-ups, pauses) and :func:`~.worker.submit_unit`
``expirer``            removes messages past their time to be received
``outgoing_expiry``    gives up outgoing entries past their time to reach
                       the queue that were never sent (for the expirer)
``poison``             writes what aborts decided (counts, moves to
                       ``;retry`` and ``;poison``), returns from ``;retry``
``maintenance``        idle transactions, erasing (with message-id
                       reservations and the ballast), outcome pruning
``final_ack_courier``  sends the FinalAcks we owe our sources, forgets
                       them once acknowledged (built and run by the
                       peering hub, which routes its acknowledgments)
=====================  ===================================================

The daemon builds and runs the expirer, the poison worker and maintenance;
the peering hub the courier. Each is imported from its module: this
``__init__`` imports nothing, so that importing the courier (as the hub
does) loads no other worker.
"""
