#!/usr/bin/env bash
# One interleaved campaign of the side-by-side benchmark (../shared/bench-peers):
# RabbitMQ (quorum, classic), ActiveMQ and qmgr at this checkout, and with
# --before COMMIT also qmgr at that commit, beside them in every rep.
#
#   bench/peers/run.sh [--before COMMIT] [--reps N] [--peers DIR] [--work DIR]
#
# As root (it installs rabbitmq-server and activemq if they are missing). The
# harness is copied to --work (default /tmp/bench-peers) and patched with
# harness.patch: qmgr's result label from QMGR_LABEL, the "before" daemon's runs
# after qmgr's, and W4tx10 (W4 with the consumer taking up to 10 messages per
# transaction). Raw JSON lines go to WORK/results/raw/; the table with the
# ratios is printed by summarize.py at the end (--json for scripts there).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PEERS="$REPO/../shared/bench-peers"
WORK=/tmp/bench-peers
REPS=3
BEFORE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --before) BEFORE="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --peers) PEERS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$REPO/.venv/bin/python" ] || { echo "no $REPO/.venv: run make test first" >&2; exit 2; }

rm -rf "$WORK"
cp -r "$PEERS" "$WORK"
chmod -R u+w "$WORK"
(cd "$WORK" && patch -s -p1 < "$HERE/harness.patch")
if ! command -v rabbitmq-server >/dev/null || ! command -v activemq >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server activemq
fi
python3 -m venv "$WORK/.venv"
"$WORK/.venv/bin/pip" install -q pika stomp.py lmdb trio

export QMGR_CHECKOUT="$REPO"
BEFORE_DIR=/tmp/bench-qmgr-before
stop_all() {
  cd "$WORK"
  ./qmgr_daemon.sh stop || true
  if [ -f "$BEFORE_DIR/pid" ]; then kill "$(cat "$BEFORE_DIR/pid")" 2>/dev/null || true; fi
  ./brokers.sh stop activemq || true
  ./brokers.sh stop rabbitmq || true
}
trap stop_all EXIT
cd "$WORK"
./brokers.sh start rabbitmq
./brokers.sh start activemq
./qmgr_daemon.sh wipe
./qmgr_daemon.sh start
if [ -n "$BEFORE" ]; then
  export QMGR_BEFORE="$WORK/before"
  git -C "$REPO" worktree add -f --detach "$QMGR_BEFORE" "$BEFORE" >/dev/null
  rm -rf "$BEFORE_DIR" && mkdir -p "$BEFORE_DIR/data"
  PYTHONPATH="$QMGR_BEFORE" setsid "$REPO/.venv/bin/python" -m qmgr serve \
    --data-dir "$BEFORE_DIR/data" --listen 127.0.0.1:18811 --client-listen 127.0.0.1:18812 \
    --log-level warning --log-format json > "$BEFORE_DIR/stdout.log" 2>&1 < /dev/null &
  echo $! > "$BEFORE_DIR/pid"
  for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/18812) 2>/dev/null && break; sleep 0.1; done
fi
TAG="side-by-side-$(date +%F)-$(date +%H%M)"
REPS="$REPS" TAG="$TAG" ./run_side_by_side.sh
"$REPO/.venv/bin/python" "$HERE/summarize.py" "results/raw/$TAG.jsonl"
if [ -n "$BEFORE" ]; then git -C "$REPO" worktree remove --force "$QMGR_BEFORE"; fi
