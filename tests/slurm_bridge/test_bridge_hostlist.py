"""Hostlist expressions: expand, compress, round trip, garbage."""

import pytest

from slurm_bridge.hostlist import HostlistError, compress, expand


@pytest.mark.parametrize(
    ("expression", "hosts"),
    [
        ("a100n[1-2],t4n1", ["a100n1", "a100n2", "t4n1"]),
        ("n[01-03,7]", ["n01", "n02", "n03", "n7"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("h100n1", ["h100n1"]),
        ("", []),
        ("None assigned", []),
        ("(null)", []),
    ],
)
def test_expand(expression, hosts):
    assert expand(expression) == hosts


@pytest.mark.parametrize(
    ("hosts", "expression"),
    [
        (["a100n1", "a100n2", "t4n1"], "a100n[1-2],t4n1"),
        (["n3", "n1", "n2", "n7"], "n[1-3,7]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["a100n1"], "a100n1"),
        (["a100n2", "a100n1", "a100n2"], "a100n[1-2]"),
        (["login"], "login"),
    ],
)
def test_compress(hosts, expression):
    assert compress(hosts) == expression


def test_round_trip_keeps_zero_padding():
    hosts = ["n01", "n02", "n03", "n10"]
    assert expand(compress(hosts)) == hosts


@pytest.mark.parametrize("garbage", ["n[1-", "n]1[", "n[3-1]", "n[a-b]", "n[[1]]", "a,,b"])
def test_garbage_raises(garbage):
    with pytest.raises(HostlistError):
        expand(garbage)


try:
    from hypothesis import given
    from hypothesis import strategies as st
except ImportError:  # hypothesis is a test extra; the examples above still run without it
    given = None

if given is not None:
    _hosts = st.lists(
        st.builds(
            lambda prefix, number, width: f"{prefix}{str(number).zfill(width)}",
            st.sampled_from(["n", "a100n", "gpu-", "rack1-n"]),
            st.integers(0, 120),
            st.integers(0, 3),
        ),
        max_size=30,
    )

    @given(_hosts)
    def test_compress_then_expand_gives_the_same_hosts(hosts):
        expanded = expand(compress(hosts))
        assert sorted(expanded) == sorted(set(hosts))
