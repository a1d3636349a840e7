"""The egress policy's decisions, and the proxy's refusals on the wire."""

from __future__ import annotations

import ipaddress
import os

import pytest

from managoat_sandbox._engine import egress
from managoat_sandbox._engine.egress import Policy, Refusal


@pytest.mark.parametrize("entry", ["example.com", "Sub.Example.COM.", "*.example.org", "a-b.c0"])
def test_domain_names_and_wildcards_are_accepted(entry: str) -> None:
    assert egress.check_domain(entry) == entry.lower().rstrip(".")


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "*",
        "http://x.com",
        "x.com/path",
        "x.com:443",
        "a b.c",
        "10.0.0.1",
        "-a.com",
        "a..b",
        "*.*.com",
        "a" * 64 + ".com",
    ],
)
def test_anything_else_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        egress.check_domain(entry)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", "public"),
        ("2606:4700::1111", "public"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12::1", "private"),
        ("192.0.2.2", "private"),
        ("127.0.0.1", "blocked"),
        ("::1", "blocked"),
        ("169.254.169.254", "blocked"),
        ("fe80::1", "blocked"),
        ("0.0.0.0", "blocked"),
        ("224.0.0.1", "blocked"),
        ("::ffff:127.0.0.1", "blocked"),
        ("2002:a9fe:a9fe::1", "blocked"),
        ("2002:7f00:1::1", "blocked"),
        ("2002:a00:1::1", "private"),
        ("2002:808:808::1", "public"),
        ("100.100.100.200", "blocked"),
        ("fd00:ec2::254", "blocked"),
    ],
)
def test_addresses_are_classified(address: str, kind: str) -> None:
    assert egress.classify(ipaddress.ip_address(address)) == kind


def test_decisions_follow_the_policy() -> None:
    pins = {"internal.test": "10.0.0.5", "public.test": "8.8.8.8", "meta.test": "169.254.169.254"}
    no_policy = Policy(resolve=pins)
    assert egress.decide(no_policy, "public.test", 443) == [(ipaddress.ip_address("8.8.8.8"), 443)]
    assert egress.decide(no_policy, "8.8.4.4", 80)[0][0] == ipaddress.ip_address("8.8.4.4")
    for host in ("internal.test", "meta.test", "127.0.0.1", "10.0.0.1"):
        with pytest.raises(Refusal):
            egress.decide(no_policy, host, 80)
    allow = Policy(allow=("internal.test", "*.example.org", "meta.test"), resolve=pins)
    assert egress.decide(allow, "internal.test", 80)[0][0] == ipaddress.ip_address("10.0.0.5")
    for host in ("public.test", "8.8.8.8", "example.org", "meta.test"):
        with pytest.raises(Refusal):
            egress.decide(allow, host, 80)
    assert allow.names("a.b.example.org") and not allow.names("badexample.org")
    with pytest.raises(Refusal) as caught:
        egress.decide(Policy(allow=()), "public.test", 80)
    assert "denies all" in str(caught.value)


def test_an_unreadable_policy_denies_everything(tmp_path: os.PathLike[str]) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert egress.read_policy(fd) == Policy()
        os.symlink("/etc/hostname", os.path.join(tmp_path, egress.POLICY))
        assert egress.read_policy(fd).deny_all
    finally:
        os.close(fd)


def test_requests_are_parsed_into_where_they_go() -> None:
    connect = egress.parse_request(b"CONNECT Example.COM.:443 HTTP/1.1\r\nHost: x")
    assert connect == egress.Request("example.com", 443, None)
    plain = egress.parse_request(
        b"GET http://user@Example.com:8080/p?q#frag HTTP/1.1\r\nHost: x\r\n"
        b"Proxy-Connection: keep-alive\r\nConnection: keep-alive"
    )
    assert plain == egress.Request(
        "example.com", 8080, b"GET /p?q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert egress.parse_request(b"GET http://[2606:4700::1111]?x HTTP/1.0").host == (
        "2606:4700::1111"
    )
    assert egress.parse_request(b"GET http://a.example HTTP/1.0").port == 80
    assert egress.parse_request(b"CONNECT xn--bcher-kva.example:1 HTTP/1.1").port == 1


@pytest.mark.parametrize(
    "head",
    [
        b"GET http://a:99999/ HTTP/1.1",
        b"CONNECT host:1:2 HTTP/1.1",
        b"CONNECT " + b"a" * 64 + b".example:443 HTTP/1.1",
        "CONNECT b\u00fccher.example:443 HTTP/1.1".encode(),
        b"CONNECT xn--.example:443 HTTP/1.1",
        b"GET http://[::1/ HTTP/1.1",
        b"GET https://a/ HTTP/1.1",
    ],
)
def test_unparsable_requests_are_refused_400(head: bytes) -> None:
    with pytest.raises(Refusal) as caught:
        egress.parse_request(head)
    assert caught.value.status == 400


def test_a_relayed_connection_is_permitted_only_while_the_policy_would_open_it() -> None:
    private, public = ipaddress.ip_address("10.0.0.5"), ipaddress.ip_address("8.8.8.8")
    allow = Policy(allow=("internal.test", "*.example.org"))
    assert egress.permits(allow, "internal.test", private)
    assert egress.permits(allow, "a.example.org", public)
    assert not egress.permits(allow, "other.test", public)
    assert not egress.permits(allow, "8.8.8.8", public)
    assert not egress.permits(Policy(), "internal.test", private)
    assert egress.permits(Policy(), "8.8.8.8", public)
    assert not egress.permits(Policy(), "meta.test", ipaddress.ip_address("169.254.169.254"))
    assert not egress.permits(Policy(allow=()), "internal.test", private)
