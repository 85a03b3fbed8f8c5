"""``bench/peers/summarize.py``: the side-by-side campaign's medians and ratios."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "peers" / "summarize.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peer_summary", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_summary"] = module
    spec.loader.exec_module(module)
    return module


def record(broker: str, workload: str, variant: str = "", **fields: float) -> dict[str, Any]:
    return {"broker": broker, "workload": workload, "variant": variant, **fields}


RECORDS = [
    record("ceiling", "fdatasync", msgs_per_s=3000),
    record("ceiling", "lmdb", msgs_per_s=1700),
    # W1: ActiveMQ is the best peer; qmgr's median of three reps is 1,200.
    record("rabbitmq", "W1", "quorum tx/1", msgs_per_s=600),
    record("rabbitmq", "W1", "classic tx/1", msgs_per_s=500),
    record("activemq", "W1", "stomp", msgs_per_s=1000),
    *(record("qmgr", "W1", "tx/1", msgs_per_s=r) for r in (1100, 1200, 1500)),
    record("qmgr-before", "W1", "tx/1", msgs_per_s=700),
    # W3: classic does not sync its acknowledgements and is left out.
    record("rabbitmq", "W3", "quorum get", msgs_per_s=400),
    record("rabbitmq", "W3", "classic get", msgs_per_s=1600),
    record("activemq", "W3", "stomp", msgs_per_s=100),
    record("qmgr", "W3", "tx receive", msgs_per_s=800),
    # W4: lower is better; W4tx10 is compared with the peers' W4.
    record("rabbitmq", "W4", "quorum", lat_p99_us=2000, lat_p50_us=900, msgs_per_s=500),
    record("rabbitmq", "W4", "classic", lat_p99_us=1000, lat_p50_us=500, msgs_per_s=500),
    record("activemq", "W4", "stomp", lat_p99_us=1500, lat_p50_us=700, msgs_per_s=500),
    record("qmgr", "W4", "tx/1", lat_p99_us=4000, lat_p50_us=1000, msgs_per_s=499),
    record("qmgr", "W4tx10", "tx/1", lat_p99_us=3000, lat_p50_us=1100, msgs_per_s=500),
]


def test_ratios_are_to_the_best_durable_peer() -> None:
    summary = load().summarize(RECORDS)
    rows = {row["row"].split()[0] + " " + row["field"]: row for row in summary["rows"]}
    w1 = rows["W1 msgs_per_s"]
    assert w1["best_durable_peer"] == "ActiveMQ"
    assert w1["qmgr"]["qmgr"] == {"median": 1200.0, "min": 1100.0, "max": 1500.0, "reps": 3}
    assert w1["x_best_durable_peer"] == {"qmgr": 1.2, "qmgr before": 0.7}
    w3 = rows["W3 msgs_per_s"]
    assert w3["best_durable_peer"] == "RabbitMQ quorum"
    assert w3["x_best_durable_peer"]["qmgr"] == 2.0
    assert w3["x_best_durable_peer"]["qmgr before"] is None
    p99 = rows["W4 lat_p99_us"]
    assert p99["best_durable_peer"] == "RabbitMQ classic"
    assert p99["x_best_durable_peer"]["qmgr"] == 4.0
    batched = rows["W4tx10 lat_p99_us"]
    assert batched["peers"]["ActiveMQ"]["median"] == 1500.0
    assert batched["x_best_durable_peer"]["qmgr"] == 3.0
    assert summary["ceilings"]["lmdb"]["median"] == 1700.0


def test_the_script_prints_the_table_and_json(tmp_path: Path) -> None:
    results = tmp_path / "campaign.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    table = subprocess.run(
        [sys.executable, str(SCRIPT), str(results)], check=True, capture_output=True, text=True
    ).stdout
    assert (
        "| W1 1 message per commit (msg/s) | 600 | 500 | 1,000 | 700 | 1,200 (1,100-1,500) |"
        in table
    )
    assert "**1.20x** vs ActiveMQ" in table
    printed = subprocess.run(
        [sys.executable, str(SCRIPT), str(results), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(printed)["rows"][0]["x_best_durable_peer"]["qmgr"] == 1.2
