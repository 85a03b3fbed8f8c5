"""The store's write operations, one module per concern.

Every operation is a subclass of :class:`storage.units.Operation` that plans
itself through a :class:`storage.context.PlanContext`; the records and the
reads only its concern uses sit beside its operations. The core (``context``,
``plan``, ``catalog``, ...) never imports these modules (only the ``store``
facade reads through them); they import the core, and each other only
downwards:

``messages`` -> ``subqueues`` -> ``queues``; ``peering`` -> ``messages``;
``poison`` -> ``subqueues``; ``prepared`` -> ``messages``, ``peering``,
``outcomes``; ``restore`` -> ``peering``; ``meta``, ``outcomes``, ``expiry``,
``confirmations`` and ``lists`` import no other concern.

Import the operations from :mod:`storage`, not from here.
"""
