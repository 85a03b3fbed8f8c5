"""The table of one side-by-side campaign (``bench/peers/run.sh``), with its ratios.

Run::

    .venv/bin/python bench/peers/summarize.py RESULTS.jsonl [--json]

Each cell is the median over the campaign's reps (min-max when there were
several). For every workload the ratio is qmgr's median over the best durable
peer's (RabbitMQ quorum, RabbitMQ classic, ActiveMQ; RabbitMQ classic is left
out of W3, whose acknowledgements it does not sync), for qmgr and, when the
campaign ran it, for qmgr at the earlier commit ("before"). In the latency
rows lower is better, so a ratio above 1 means qmgr is slower. W4tx10 (qmgr's
consumer taking up to 10 messages per transaction) is compared with the
peers' W4, the same producer and rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEERS = {
    "RabbitMQ quorum": ("rabbitmq", "quorum"),
    "RabbitMQ classic": ("rabbitmq", "classic"),
    "ActiveMQ": ("activemq", ""),
}
QMGRS = {"qmgr before": "qmgr-before", "qmgr": "qmgr"}


@dataclass(frozen=True)
class Row:
    label: str
    workload: str
    field: str
    higher_is_better: bool
    peers_workload: str = ""
    excluded: tuple[str, ...] = ()


ROWS = (
    Row("W1 1 message per commit (msg/s)", "W1", "msgs_per_s", True),
    Row("W2tx 100 per commit (msg/s)", "W2", "msgs_per_s", True),
    Row(
        "W3 transactional receive, 1 per commit (msg/s)",
        "W3",
        "msgs_per_s",
        True,
        excluded=("RabbitMQ classic",),
    ),
    Row("W4 producer's rate reached (msg/s, of 500)", "W4", "msgs_per_s", True),
    Row("W4 p50 latency (µs)", "W4", "lat_p50_us", False),
    Row("W4 p99 latency (µs)", "W4", "lat_p99_us", False),
    Row("W4tx10 p50 latency (µs)", "W4tx10", "lat_p50_us", False, peers_workload="W4"),
    Row("W4tx10 p99 latency (µs)", "W4tx10", "lat_p99_us", False, peers_workload="W4"),
    Row("W5 4 producer processes x W1 (msg/s)", "W5", "msgs_per_s", True),
)


def values(
    records: list[dict[str, Any]], broker: str, variant: str, workload: str, field: str
) -> list[float]:
    return [
        float(r[field])
        for r in records
        if r["broker"] == broker
        and r["workload"] == workload
        and r["variant"].startswith(variant)
        and r.get(field) is not None
    ]


def cell(found: list[float]) -> dict[str, float] | None:
    if not found:
        return None
    return {
        "median": statistics.median(found),
        "min": min(found),
        "max": max(found),
        "reps": len(found),
    }


def text(summary: dict[str, float] | None) -> str:
    if summary is None:
        return "-"
    median = f"{summary['median']:,.0f}"
    if summary["reps"] < 2:
        return median
    return f"{median} ({summary['min']:,.0f}-{summary['max']:,.0f})"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    ceilings = {
        name: cell([float(r["msgs_per_s"]) for r in records if r["workload"] == name])
        for name in ("fdatasync", "lmdb")
    }
    rows = []
    for row in ROWS:
        peers = {
            name: cell(
                values(records, broker, variant, row.peers_workload or row.workload, row.field)
            )
            for name, (broker, variant) in PEERS.items()
        }
        qmgrs = {
            name: cell(values(records, broker, "", row.workload, row.field))
            for name, broker in QMGRS.items()
        }
        durable = {name: s["median"] for name, s in peers.items() if s and name not in row.excluded}
        best_name = None
        if durable:
            pick = max if row.higher_is_better else min
            best_name = pick(durable, key=lambda name: durable[name])
        ratios = {
            name: (s["median"] / durable[best_name] if s and best_name else None)
            for name, s in qmgrs.items()
        }
        rows.append(
            {
                "row": row.label,
                "workload": row.workload,
                "field": row.field,
                "higher_is_better": row.higher_is_better,
                "peers": peers,
                "qmgr": qmgrs,
                "best_durable_peer": best_name,
                "x_best_durable_peer": ratios,
            }
        )
    return {"ceilings": ceilings, "rows": rows}


def table(summary: dict[str, Any]) -> str:
    names = [*PEERS, *QMGRS]
    lines = [
        "| workload | " + " | ".join(names) + " | qmgr ÷ best durable peer | before ÷ best |",
        "|---" * (len(names) + 3) + "|",
    ]
    for row in summary["rows"]:
        cells = [text(row["peers"][n]) for n in PEERS] + [text(row["qmgr"][n]) for n in QMGRS]
        best = row["best_durable_peer"]
        for name in ("qmgr", "qmgr before"):
            ratio = row["x_best_durable_peer"][name]
            cells.append("-" if ratio is None else f"**{ratio:.2f}x** vs {best}")
        lines.append(f"| {row['row']} | " + " | ".join(cells) + " |")
    ceilings = summary["ceilings"]
    lines.append("")
    lines.append(
        f"Ceilings in the same campaign: fdatasync {text(ceilings['fdatasync'])}/s, "
        f"LMDB synced commits {text(ceilings['lmdb'])}/s."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, help="the campaign's JSON lines")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    records = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    summary = summarize(records)
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print(table(summary))


if __name__ == "__main__":
    main()
