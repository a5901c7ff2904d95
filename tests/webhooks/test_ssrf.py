from __future__ import annotations

import pytest

from webhooks.ssrf import RefusedURL, check_url, checked_addresses


@pytest.fixture(autouse=True)
def nothing_allowed(settings) -> None:
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("https://192.168.0.7/hook", "private"),
        ("http://172.16.5.5/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[fe80::1]/hook", "link-local"),
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://224.0.0.1/hook", "non-public"),
        ("ftp://93.184.215.14/hook", "Only http"),
        ("file:///etc/passwd", "Only http"),
        ("http://user:pw@93.184.215.14/hook", "credentials"),
        ("http:///hook", "no host"),
        ("http://no-such-host.invalid/hook", "cannot be resolved"),
    ],
)
def test_it_refuses(url, why):
    with pytest.raises(RefusedURL, match=why):
        check_url(url)


def test_it_accepts_a_public_address():
    check_url("https://93.184.215.14/hooks/argus")  # raises RefusedURL on a refusal
    check_url("http://[2606:4700::1111]:8080/x")
    # What must hold: the delivery connects to exactly the public address checked.
    assert checked_addresses("93.184.215.14", 443) == ["93.184.215.14"]
    assert checked_addresses("2606:4700::1111", 8080) == ["2606:4700::1111"]


def test_an_allowed_host_may_be_internal(settings):
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["localhost", "10.1.2.3"]
    check_url("http://localhost:9000/hook")
    check_url("http://10.1.2.3/hook")
    with pytest.raises(RefusedURL, match="loopback"):
        check_url("http://127.0.0.1/hook")
