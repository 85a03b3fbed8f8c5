# qmgr queue manager image: `docker build -t qmgr .`
#
# It serves its ports to other hosts, so it runs with TLS on each (mutual TLS
# on the peer port) and client certificates required, from files mounted in
# /etc/qmgr/tls: qm.crt and qm.key (this queue manager's certificate and key)
# and ca.crt (the deployment's CA). See docs/operations.md#security:
#
#   qmgr certs init --dir certs
#   qmgr certs issue qm1 --dir certs --out tls --host qm1.example.com
#   sudo chown 10001 tls/qm1.key        # the image's qmgr user reads its key
#   docker run -d -p 1801:1801 -p 1802:1802 -v qmgr-data:/var/lib/qmgr \
#       -v "$PWD/tls/qm1.crt:/etc/qmgr/tls/qm.crt:ro" \
#       -v "$PWD/tls/qm1.key:/etc/qmgr/tls/qm.key:ro" \
#       -v "$PWD/tls/ca.crt:/etc/qmgr/tls/ca.crt:ro" qmgr
#
# Other queue managers reach it at the host's address and the mapped port
# (`-p 11801:1801`: DIRECT=TCP:HOST-ADDRESS:11801\private$\QUEUE); it is not a
# router, so it takes what arrives as its own. Its command (CMD, at the end of
# this file) lets peers connect from any address (peers.accept_from: every
# IPv4 and IPv6 network, where the default is loopback only), as an image
# cannot know its peers' networks: what admits a queue manager is its
# certificate, signed by ca.crt, in the mutual TLS handshake. To admit only
# your queue managers' networks, run the image with that command and
# peers.accept_from changed (--set 'peers.accept_from=["10.1.0.0/16"]'). List
# the address peers reach it at first in server.aliases (--set
# 'server.aliases=["HOST-ADDRESS:11801"]', or aliases in a qmgr.toml mounted on
# /etc/qmgr/qmgr.toml): the admin and response queues of the messages it sends
# name it so, and acknowledgments and responses come back (without it they name
# the container's host name, which its peers cannot reach); its own clients may
# then send to that name too.
#
# Without those files it does not start (it says which file is missing). To
# serve clients inside the container only, on loopback and without TLS (and
# on the Unix-domain socket the health check uses):
#
#   docker run -d -v qmgr-data:/var/lib/qmgr qmgr serve --config /etc/qmgr/qmgr.toml \
#       --data-dir /var/lib/qmgr --log-format json \
#       --set server.unix_socket=/run/qmgr/qmgr.sock
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --system --uid 10001 --home-dir /var/lib/qmgr --shell /usr/sbin/nologin qmgr \
 && mkdir -p /var/lib/qmgr /etc/qmgr/tls /run/qmgr \
 && chown qmgr:qmgr /var/lib/qmgr /run/qmgr

WORKDIR /opt/qmgr
COPY pyproject.toml README.md ./
COPY qmgr ./qmgr
COPY wire ./wire
COPY storage ./storage
RUN pip install . && rm -rf /opt/qmgr/build
COPY config/qmgr.toml /etc/qmgr/qmgr.toml

USER qmgr
VOLUME ["/var/lib/qmgr"]
# 1801: peers (MSMQ binary protocol, mutual TLS); 1802: clients (SDK and CLI, TLS);
# 1803: HTTPS (/healthz without authentication, /metrics for auth.monitors).
EXPOSE 1801 1802 1803
# The health check is a local client on the Unix-domain socket, known as the
# image's qmgr user (`docker exec CONTAINER qmgr --server unix:/run/qmgr/qmgr.sock
# ...` administers the same way). The default command (CMD, below) and the one
# for clients inside the container (at the top) set that socket
# (server.unix_socket); a command of your own must too, with
# --set server.unix_socket=/run/qmgr/qmgr.sock or in its qmgr.toml, or the
# container is never healthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["qmgr", "--server", "unix:/run/qmgr/qmgr.sock", "status", "--json"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["qmgr"]
CMD ["serve", "--config", "/etc/qmgr/qmgr.toml", "--data-dir", "/var/lib/qmgr", \
     "--listen", "0.0.0.0:1801", "--client-listen", "0.0.0.0:1802", \
     "--http-listen", "0.0.0.0:1803", "--log-format", "json", \
     "--set", "tls.certificate=/etc/qmgr/tls/qm.crt", "--set", "tls.key=/etc/qmgr/tls/qm.key", \
     "--set", "tls.ca=/etc/qmgr/tls/ca.crt", "--set", "auth.required=true", \
     "--set", "server.unix_socket=/run/qmgr/qmgr.sock", "--set", "auth.admins=[\"qmgr\"]", \
     "--set", "peers.accept_from=[\"0.0.0.0/0\", \"::/0\"]"]
