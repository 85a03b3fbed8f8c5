"""The SDK's calls, one module per concern, without I/O.

A *call* is what one public method of the clients asks of the queue manager
and makes of its answers, written once for both clients as a generator (a
``_protocol.Flow``): it checks the arguments (and the protocol version the
request needs), packs each request with the connection's ``ClientProtocol``
and yields it, is sent the reply (or thrown the error met writing it or
waiting for it), and returns what the method returns. ``QueueManager`` and
``AsyncQueueManager`` run it their own way (``_blocking_io`` and
``_trio_io``); a test runs it against scripted replies, without a socket.

Modules: ``handshake``, ``queues``, ``messages`` (peeking
and removing ranges), ``transactions`` (prepare, commit, abort),
``two_phase`` (resolving and listing prepared transactions), ``poison``
(retry settings and moves), ``lists`` (distribution lists), ``outgoing``,
``permissions`` and ``trace``. Each holds the public values its replies
become.
"""
