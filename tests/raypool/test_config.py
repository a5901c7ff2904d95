"""The node pool's environment configuration (seed 002 §3.3)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from raypool.config import DEFAULT_SHARED_ROOT, ConfigError, NodeConfig, detect_node_ip, parse_resources_kv


def test_the_defaults_are_those_of_seed_002_with_the_checkout_shared_root() -> None:
    config = NodeConfig.from_env({})
    assert config.role == ""
    assert config.shared_root == DEFAULT_SHARED_ROOT
    assert Path(__file__).resolve().parents[2] / "var" / "private" == DEFAULT_SHARED_ROOT
    assert config.cluster_name == "argus-ray"
    assert config.head_file == DEFAULT_SHARED_ROOT / "ray" / "discovery" / "argus-ray" / "head.json"
    assert (config.ray_port, config.dashboard_port) == (6379, 8265)
    assert (config.ttl_s, config.refresh_s, config.poll_s) == (60, 10, 5)
    assert config.node_ip == ""
    assert config.worker_resources == {"worker_node": 100}
    assert config.ray_extra_args == ()
    assert config.log_dir is None


def test_every_variable_is_read() -> None:
    config = NodeConfig.from_env(
        {
            "ARGUS_ROLE": "worker",
            "ARGUS_SHARED_ROOT": "/private",
            "ARGUS_CLUSTER_NAME": "c2",
            "ARGUS_RAY_PORT": "6400",
            "ARGUS_DASHBOARD_PORT": "8300",
            "ARGUS_TTL_S": "30",
            "ARGUS_REFRESH_S": "2.5",
            "ARGUS_POLL_S": "1",
            "ARGUS_NODE_IP": "10.0.0.7",
            "ARGUS_WORKER_RESOURCES_KV": "worker_node=100, big_mem=0.5",
            "ARGUS_RAY_EXTRA_ARGS": "--num-gpus=4 --temp-dir='/tmp/a b'",
            "ARGUS_LOG_DIR": "/private/common/logs",
        }
    )
    assert config.role == "worker"
    assert config.head_file == Path("/private/ray/discovery/c2/head.json")
    assert (config.ray_port, config.dashboard_port) == (6400, 8300)
    assert (config.ttl_s, config.refresh_s, config.poll_s) == (30, 2.5, 1)
    assert config.node_ip == "10.0.0.7"
    assert config.worker_resources == {"worker_node": 100, "big_mem": 0.5}
    assert config.ray_extra_args == ("--num-gpus=4", "--temp-dir=/tmp/a b")
    assert config.log_dir == Path("/private/common/logs")


def test_argus_head_ip_file_overrides_the_path() -> None:
    config = NodeConfig.from_env({"ARGUS_HEAD_IP_FILE": "/elsewhere/head.json"})
    assert config.head_file == Path("/elsewhere/head.json")


def test_an_empty_variable_means_the_default() -> None:
    assert NodeConfig.from_env({"ARGUS_RAY_PORT": "", "ARGUS_TTL_S": " "}).ray_port == 6379


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ARGUS_ROLE", "api", "ARGUS_ROLE"),
        ("ARGUS_RAY_PORT", "http", "ARGUS_RAY_PORT"),
        ("ARGUS_DASHBOARD_PORT", "70000", "ARGUS_DASHBOARD_PORT"),
        ("ARGUS_POLL_S", "0", "ARGUS_POLL_S"),
        ("ARGUS_TTL_S", "soon", "ARGUS_TTL_S"),
        ("ARGUS_TTL_S", "5", "longer than ARGUS_REFRESH_S"),
        ("ARGUS_CLUSTER_NAME", "../x", "ARGUS_CLUSTER_NAME"),
        ("ARGUS_RAY_EXTRA_ARGS", "--temp-dir='unclosed", "ARGUS_RAY_EXTRA_ARGS"),
        ("ARGUS_WORKER_RESOURCES_KV", "worker_node", "name=amount"),
        ("ARGUS_WORKER_RESOURCES_KV", "worker_node=lots", "not a number"),
        ("ARGUS_WORKER_RESOURCES_KV", "worker_node=-1", "negative"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NodeConfig.from_env({name: value})


def test_resources_keep_whole_numbers_whole() -> None:
    assert parse_resources_kv("worker_node=100,,a=1.5") == {"worker_node": 100, "a": 1.5}
    assert isinstance(parse_resources_kv("worker_node=100")["worker_node"], int)


def test_the_node_ip_is_detected_as_an_address() -> None:
    address = ipaddress.ip_address(detect_node_ip())
    # An IPv4 address other hosts could reach, or loopback when the host has no route at all.
    assert address.version == 4
    assert not address.is_unspecified and not address.is_multicast
