"""The shipped monitoring files: the alerting rules pass ``promtool check rules`` and
their tests (``qmgr-alerts.test.yml``, every alert in them), and the rules and the
Grafana dashboard name only families the daemon exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import yaml
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from server.http.metrics_kit import sources_of

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.server.http.exposition import Exposition
from qmgr.server.http.metrics import QueueManagerCollector

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "prometheus" / "qmgr-alerts.yml"
RULE_TESTS = Path(__file__).with_name("qmgr-alerts.test.yml")
DASHBOARD = ROOT / "config" / "grafana" / "qmgr.json"
#: A metric name in PromQL: ours, the process collector's, Prometheus's own ``up``.
NAME = re.compile(r"\b((?:qmgr|process)_[a-z_]+)\b")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "the alerting rules are checked with promtool: install it "
            "(Debian/Ubuntu: apt-get install prometheus; or a Prometheus release's promtool "
            "on the PATH); .ci/run installs it"
        )
    return subprocess.run(
        [found, *args], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )


def test_the_rules_are_valid() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_pass_their_tests() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_tested() -> None:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert alerts == {
        "QmgrDown",
        "QmgrDeadLettersGrowing",
        "QmgrRefusedMessagesNotKept",
        "QmgrOldestMessageTooOld",
        "QmgrOutgoingBacklogGrowing",
        "QmgrPeerLinkDown",
        "QmgrStoreNearlyFull",
        "QmgrTransactionInDoubt",
        "QmgrFinalAcksPilingUp",
    }
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    fired = {
        case["alertname"]
        for test in tests["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == alerts


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name a scrape has (families and their ``_total``, ``_bucket``...)."""
    directory = tmp_path_factory.mktemp("store")
    with storage.Store(directory, initial_map_size=1 << 22, durable=False) as store:
        core = QueueManagerCore(store)
        store.commit(core.queues.system_queue_units(0.0), now=0.0)  # series per queue
        sources = sources_of(store, directory, core=core)
        collector = QueueManagerCollector(sources)
        registry = CollectorRegistry()
        registry.register(collector)
        ProcessCollector(registry=registry)
        body, _ = trio.run(Exposition(registry, collector).scrape, "")
    names = set()
    for family in text_string_to_metric_families(body.decode()):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    # A histogram's and a counter's sample names, which a family without samples lacks.
    names.update({"qmgr_dead_letters_total", "qmgr_sync_seconds_bucket"})
    return names


def expressions(node: object) -> Iterator[str]:
    """Every ``expr`` in a decoded rule file or dashboard."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def test_the_rules_name_only_exported_families(exported: set[str]) -> None:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    named = {name for expr in expressions(rules) for name in NAME.findall(expr)}
    assert named
    assert named <= exported, named - exported


def test_the_dashboard_is_json_over_exported_families(exported: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "qmgr-overview"
    found = list(expressions(dashboard["panels"]))
    assert len(found) >= 20
    named = {name for expr in found for name in NAME.findall(expr)}
    assert named <= exported, named - exported
    # Every per-queue and daemon-wide family of the metrics is on it.
    ours = {name for name in exported if name.startswith("qmgr_")}
    shown = {name.removesuffix("_bucket") for name in named}
    missing = {
        name
        for name in ours
        if not any(name == s or name.startswith(s + "_") or s.startswith(name) for s in shown)
    }
    assert missing <= {"qmgr_build_info"}, missing
