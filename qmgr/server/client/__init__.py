"""The daemon's client side: accepting client connections, serving them, and their requests.

Theory of operation
-------------------
A connection goes through these modules, in order:

* ``accept`` (:class:`~.accept.ClientPort`): room at ``server.max_connections``,
  admission (``qmgr.server.admission``, shared with the peer port), the
  failure delay and the TLS handshake, or the local user on the Unix-domain
  socket (``unix_socket``); the socket is a ``qmgr.socket_stream.RawConnection``;
* ``session`` (:class:`~.session.ClientSession`): the trio adapter of the
  connection's sans-IO machine (``qmgr.protocol.client_connection``), which
  decides frames, the Hello, authentication, which requests are allowed and
  the deadlines; the session moves bytes, waits, and runs requests;
* ``authorization``: whether the principal may make a request, with the
  need (``needs``) the request table declares;
* ``handlers``: the request table, ``REQUESTS`` (``registry``): a plain
  function per request, by concern, each with its need; they work on the
  connection's ``request_context.RequestContext``;
* ``error_codes``: the core's errors as the protocol's codes.

``services`` is what all of them need from the daemon, in one object. The
package re-exports nothing: import from the module that defines a name.
"""
