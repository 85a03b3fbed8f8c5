# qmgr queue manager image: `docker build -t qmgr .` then
#   docker run -d -p 1801:1801 -p 127.0.0.1:1802:1802 -v qmgr-data:/var/lib/qmgr qmgr
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --system --home-dir /var/lib/qmgr --shell /usr/sbin/nologin qmgr \
 && mkdir -p /var/lib/qmgr /etc/qmgr && chown qmgr:qmgr /var/lib/qmgr

WORKDIR /opt/qmgr
COPY pyproject.toml README.md ./
COPY qmgr ./qmgr
COPY wire ./wire
COPY storage ./storage
RUN pip install . && rm -rf /opt/qmgr/build
COPY config/qmgr.toml /etc/qmgr/qmgr.toml

USER qmgr
VOLUME ["/var/lib/qmgr"]
# 1801: peers (MSMQ binary protocol); 1802: clients (SDK and CLI).
EXPOSE 1801 1802
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["qmgr", "--server", "127.0.0.1:1802", "status", "--json"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["qmgr"]
# Clients inside the container reach 127.0.0.1:1802; publish it with care.
CMD ["serve", "--config", "/etc/qmgr/qmgr.toml", "--data-dir", "/var/lib/qmgr", \
     "--client-listen", "0.0.0.0:1802", "--log-format", "json"]
