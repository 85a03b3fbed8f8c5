"""What ``qmgr.certs.names`` accepts as names of the CA and of certificates, and as hosts:
through ``issue`` (nothing is written for a refused name), and called directly."""

from __future__ import annotations

import ipaddress
import os
import re

import pytest
from cryptography import x509

from qmgr.certs import (
    CaPaths,
    CertsError,
    LeafKind,
    describe,
    issue,
)
from qmgr.certs.names import RESERVED_NAME, check_ca_name, check_leaf_name, host_names


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("a/b", "file name"),
        ("..", "file name"),
        (".hidden", "file name"),
        ("-rf", "file name"),
        ("two words", "file name"),
        ("é", "file name"),
        ("tab\there", "control characters"),
        ("x" * 65, "longer than 64"),
        ("ca", "the CA's own"),
    ],
)
def test_bad_names_are_refused(ca: CaPaths, name: str, message: str) -> None:
    with pytest.raises(CertsError, match=message):
        issue(ca.cert.parent, name, kind="client")
    assert sorted(os.listdir(ca.cert.parent)) == ["ca.crt", "ca.key"]


def test_good_names(ca: CaPaths) -> None:
    for name in ("qm-1.site_a", "A", "x" * 64, "_svc"):
        issue(ca.cert.parent, name, kind="client")
        assert describe(ca.cert.parent / f"{name}.crt").subject == name


@pytest.mark.parametrize(
    ("kind", "hosts", "message"),
    [
        ("qm", [], "at least one host"),
        ("qm", ["bad host"], "neither an IP address nor a DNS name"),
        ("qm", ["-lead.example.com"], "neither"),
        ("qm", ["a..b"], "neither"),
        ("qm", ["münchen.example"], "xn--"),
        ("qm", ["x" * 64 + ".com"], "neither"),
        ("client", ["host.example.com"], "not hosts"),
    ],
)
def test_bad_hosts_are_refused(ca: CaPaths, kind: LeafKind, hosts: list[str], message: str) -> None:
    with pytest.raises(CertsError, match=message):
        issue(ca.cert.parent, "leaf", kind=kind, hosts=hosts)


def test_hosts_ipv6_and_repeats(ca: CaPaths) -> None:
    paths = issue(
        ca.cert.parent, "qm6", hosts=["::1", "LocalHost", "localhost.", "127.0.0.1", "::1"]
    )
    info = describe(paths.cert)
    assert info.dns_names == ("localhost",)
    assert info.ip_addresses == ("::1", "127.0.0.1")


# --------------------------------------------------------------------------
# The checks called directly
# --------------------------------------------------------------------------


def test_a_ca_name_is_any_printable_common_name() -> None:
    check_ca_name("qmgr deployment CA")  # spaces and capitals are fine for a CA
    check_ca_name("x" * 64)
    check_ca_name("ca")
    for name, message in [
        ("", "the CA name is empty"),
        ("   ", "the CA name is empty"),
        ("x" * 65, "longer than 64"),
        ("line\nbreak", "control characters"),
    ]:
        with pytest.raises(CertsError, match=message):
            check_ca_name(name)


def test_a_leaf_name_is_a_safe_file_name() -> None:
    for name in ("qm1", "qm-1.site_a", "_svc", "A", "x" * 64):
        check_leaf_name(name)
    for name, message in [
        ("", "the name is empty"),
        ("x" * 65, "longer than 64"),
        ("a\tb", "control characters"),
        ("two words", "not usable as a file name"),
        ("../up", "not usable as a file name"),
        ("-v", "not usable as a file name"),
        (".dot", "not usable as a file name"),
        (RESERVED_NAME, "the CA's own"),
    ]:
        with pytest.raises(CertsError, match=message):
            check_leaf_name(name)


def test_hosts_become_ip_addresses_and_lower_case_dns_names_in_order() -> None:
    assert host_names([]) == []
    assert host_names(["QM1.Example.COM.", "10.0.0.5", "qm1.example.com", "::1", "0:0::1"]) == [
        x509.DNSName("qm1.example.com"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.5")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    assert host_names(["xn--mnchen-3ya.example", "localhost"]) == [
        x509.DNSName("xn--mnchen-3ya.example"),
        x509.DNSName("localhost"),
    ]


def test_dns_names_follow_the_label_rules() -> None:
    label = "a" * 63
    assert host_names([f"{label}.example"]) == [x509.DNSName(f"{label}.example")]
    longest = ".".join([label] * 3 + ["b" * 61])  # 253 characters
    assert len(longest) == 253
    assert host_names([longest]) == [x509.DNSName(longest)]
    for host in [
        f"{label}a.example",  # a label of 64
        longest + "a",  # 254 characters
        "trailing-.example",
        "under_score.example",
        "",
        ".",
        "a..b",
    ]:
        with pytest.raises(CertsError, match=f"the host {re.escape(repr(host))} is neither"):
            host_names(["ok.example", host])
