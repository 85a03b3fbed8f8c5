"""The data source's options (``qmgr.spark._options``), without Spark."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import DaemonProcess, auth_required

from qmgr.spark import DataSourceError, Options


def refusal(given: dict[str, str], *, connect: bool = False) -> str:
    """What :meth:`Options.parse` (and with ``connect``, :meth:`Options.connect`)
    says of ``given``, which it must refuse, once it is sure the message names
    the data source."""
    with pytest.raises(DataSourceError, match=r"^qmgr data source: ") as info:
        options = Options.parse(given)
        if connect:
            options.connect()
    return str(info.value)


def test_options_defaults_and_case_insensitive_names() -> None:
    options = Options.parse({"ENDPOINT": "127.0.0.1:1802", "Queue": "orders"})
    assert options == Options(endpoint="127.0.0.1:1802", queue="orders")
    assert options.max_messages_per_trigger is None
    assert options.remove_on_commit is True
    assert options.connect_timeout == 10.0


def test_options_every_value() -> None:
    options = Options.parse(
        {
            "endpoint": "[::1]:1802",
            "maxmessagespertrigger": "500",
            "removeOnCommit": "False",
            "partitions": "4",
            "connectTimeout": "0.5",
            "checkpointLocation": "/tmp/x",  # Spark's own options are ignored
            "path": "whatever",
        }
    )
    assert options.endpoint == "[::1]:1802"
    assert options.queue is None
    assert options.max_messages_per_trigger == 500
    assert options.remove_on_commit is False
    assert options.partitions == 4
    assert options.connect_timeout == 0.5


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "the option 'endpoint' is required"),
        ({"endpoint": "  "}, "the option 'endpoint' is empty"),
        ({"endpoint": "localhost"}, "must be HOST:PORT"),
        ({"endpoint": "host:99999"}, "must be HOST:PORT"),
        ({"endpoint": "a:b:1802"}, "must be HOST:PORT"),
        ({"endpoint": "::1:1802"}, "must be HOST:PORT"),  # an IPv6 address with a port: [::1]:1802
        ({"endpoint": "[qm]:1802"}, "must be HOST:PORT"),
        ({"endpoint": "host:\u00b2"}, "must be HOST:PORT"),
        ({"maxMessagesPerTrigger": "0"}, "'maxMessagesPerTrigger' must be an integer >= 1"),
        ({"maxMessagesPerTrigger": "ten"}, "'maxMessagesPerTrigger' must be an integer >= 1"),
        ({"partitions": "0"}, "'partitions' must be an integer from 1 to 1024"),
        ({"removeOnCommit": "maybe"}, "'removeOnCommit' must be true or false"),
        ({"connectTimeout": "-1"}, "'connectTimeout' must be a number of seconds > 0"),
        ({"connectTimeout": "nan"}, "'connectTimeout' must be a number of seconds > 0"),
        ({"maxMessagePerTrigger": "5"}, "did you mean 'maxMessagesPerTrigger'"),
        ({"remove_on_commit": "true"}, "did you mean 'removeOnCommit'"),
        ({"tlsKey": "/client.key"}, "the option 'tlsKey' is the key of the client certificate"),
    ],
)
def test_options_errors_say_what_is_wrong(given: dict[str, str], message: str) -> None:
    options = given if "endpoint" in given or not given else {"endpoint": "h:1", **given}
    assert message in refusal(options)


def test_options_for_a_secured_queue_manager() -> None:
    options = Options.parse(
        {"endpoint": "qm:1802", "TOKEN": "t0k3n", "tlsCa": "/etc/qmgr/ca.crt", "tlscert": "c.crt"}
    )
    assert (options.token, options.tls_ca, options.tls_cert, options.tls_key) == (
        "t0k3n",
        "/etc/qmgr/ca.crt",
        "c.crt",
        None,
    )
    assert "t0k3n" not in repr(options)  # a secret stays out of plans and logs
    with pytest.raises(DataSourceError, match="did you mean 'token'"):
        Options.parse({"endpoint": "qm:1802", "tokn": "x"})
    missing = Options.parse({"endpoint": "127.0.0.1:1", "tlsCa": "/nonexistent/ca.crt"})
    with pytest.raises(DataSourceError, match="'tlsCa', 'tlsCert' and 'tlsKey'"):
        missing.connect()


def test_require_queue() -> None:
    options = Options.parse({"endpoint": "127.0.0.1:1802"})
    with pytest.raises(DataSourceError, match="the option 'queue' is required to read"):
        options.require_queue("to read")


def test_unreachable_endpoint_is_a_clear_error() -> None:
    from helpers import free_port

    options = Options.parse({"endpoint": f"127.0.0.1:{free_port()}", "connectTimeout": "30"})
    with pytest.raises(
        DataSourceError, match=r"cannot connect to the queue manager at 127\.0\.0\.1:"
    ):
        options.connect()
    # Refused at once: no time would help, and it is not said to.
    refused = refusal(
        {"endpoint": f"127.0.0.1:{free_port()}", "connectTimeout": "30"}, connect=True
    )
    assert "connection refused" in refused
    assert "connectTimeout" not in refused
    assert "tlsCa" not in refused


def test_endpoints_name_a_fleet_to_read() -> None:
    options = Options.parse({"Endpoints": " qm1:1802, qm2:1802 ,[::1]:1802", "queue": "orders"})
    assert options.fleet == ("qm1:1802", "qm2:1802", "[::1]:1802")
    assert options.members == options.fleet
    one = options.at("qm2:1802")
    assert (one.endpoint, one.fleet, one.members, one.queue) == (
        "qm2:1802",
        (),
        ("qm2:1802",),
        "orders",
    )
    assert Options.parse({"endpoint": "qm:1802"}).members == ("qm:1802",)
    single = Options.parse({"endpoint": "qm:1802"})
    assert single.at("qm:1802") is single
    single.require_one("a write")
    with pytest.raises(DataSourceError, match="'endpoints' is for reads; a write goes through"):
        options.require_one("a write")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"endpoint": "a:1", "endpoints": "b:1,c:1"}, "'endpoint' (one queue manager) or"),
        ({"endpoints": "a:1,,b:1"}, "'endpoints' must be HOST:PORT,HOST:PORT,... each"),
        ({"endpoints": "a:1,b"}, "not 'b'"),
        ({"endpoints": "a:1,b:1,a:1"}, "the option 'endpoints' names a:1 twice"),
        ({"endpoints": " "}, "the option 'endpoints' is empty"),
        ({"endpiont": "a:1"}, "did you mean 'endpoint'"),
    ],
)
def test_endpoints_errors(given: dict[str, str], message: str) -> None:
    assert message in refusal(given)


def test_a_token_the_queue_manager_refuses_is_said_so_not_a_timeout(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=auth_required({"spark": "spark-token"}))
    options = Options.parse(
        {"endpoint": daemon.address, "queue": "orders", "token": "wrong", "connectTimeout": "30"}
    )
    with pytest.raises(DataSourceError, match="refused the connection's credential") as refused:
        options.connect()
    assert "within" not in str(refused.value)
    assert "the option 'token'" in str(refused.value)


def test_a_read_without_a_credential_names_the_options_to_give(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    from qmgr.spark._read import measure

    daemon = daemon_factory(extra_args=auth_required({"spark": "spark-token"}))
    with Options.parse({"endpoint": daemon.address, "queue": "orders"}).connect() as qm:
        with pytest.raises(DataSourceError, match=r"^qmgr data source: .*the options 'token'"):
            measure(qm, "orders")
