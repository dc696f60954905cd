"""Tests of the sbatch value grammars: GRES, GPU counts, sizes, times, arrays, signals."""

from __future__ import annotations

import pytest

from cli.sbatch.values import (
    ArrayRequest,
    GpuRequest,
    parse_array,
    parse_gpu_request,
    parse_gres,
    parse_nodes,
    parse_signal,
    parse_size_mib,
    parse_time_s,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gpu", GpuRequest(1)),
        ("gpu:4", GpuRequest(4)),
        ("gpu:a100", GpuRequest(1, "a100")),
        ("gpu:a100:8", GpuRequest(8, "a100")),
        ("gpu:tesla_t4:2", GpuRequest(2, "tesla_t4")),
    ],
)
def test_gres(text: str, want: GpuRequest) -> None:
    assert parse_gres(text) == want


@pytest.mark.parametrize(
    ("text", "want_message"),
    [
        ("nvme:1", "only gpu GRES is supported, not nvme:1"),
        ("gpu:2,shard:4", "only gpu GRES is supported, not shard:4"),
        ("gpu:a100:x", "numeric count"),
        ("gpu:a100:8:9", "expected gpu[:type][:count]"),
        ("gpu::8", "expected gpu[:type][:count]"),
        ("gpu:0", "at least 1"),
        ("gpu:2,gpu:a100:2", "expected one"),
    ],
)
def test_invalid_gres(text: str, want_message: str) -> None:
    with pytest.raises(ValueError, match=want_message.replace("[", r"\[").replace("]", r"\]")):
        parse_gres(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [("8", GpuRequest(8)), ("h100:16", GpuRequest(16, "h100")), ("a100:1", GpuRequest(1, "a100"))],
)
def test_gpu_request(text: str, want: GpuRequest) -> None:
    assert parse_gpu_request(text) == want


@pytest.mark.parametrize("text", ["", "a100", "8:a100", "-1", "a100:0", "a 100:2"])
def test_invalid_gpu_request(text: str) -> None:
    with pytest.raises(ValueError):
        parse_gpu_request(text)


@pytest.mark.parametrize(("text", "want"), [("4000", 4000), ("16G", 16384), ("1T", 1048576), ("512M", 512)])
def test_sizes_default_to_megabytes(text: str, want: int) -> None:
    assert parse_size_mib(text) == want


@pytest.mark.parametrize("text", ["0", "lots", "-5G", "12Q"])
def test_invalid_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size_mib(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [("30", 1800.0), ("1:30", 90.0), ("4:00:00", 14400.0), ("1-12", 129600.0), ("2-00:00:00", 172800.0)],
)
def test_times(text: str, want: float) -> None:
    assert parse_time_s(text) == want


@pytest.mark.parametrize("text", ["abc", "UNLIMITED", "0", "1:2:3:4", "4h"])
def test_invalid_times(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_s(text)


@pytest.mark.parametrize(("text", "want"), [("4", 4), ("2-2", 2)])
def test_nodes(text: str, want: int) -> None:
    assert parse_nodes(text) == want


@pytest.mark.parametrize("text", ["0", "2-4", "x"])
def test_invalid_nodes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_nodes(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0-3", ArrayRequest((0, 1, 2, 3))),
        ("1,3,5", ArrayRequest((1, 3, 5))),
        ("0-15%4", ArrayRequest(tuple(range(16)), 4)),
        ("0-9:3", ArrayRequest((0, 3, 6, 9))),
        ("5,1-2,2", ArrayRequest((1, 2, 5))),
        ("7", ArrayRequest((7,))),
    ],
)
def test_arrays(text: str, want: ArrayRequest) -> None:
    assert parse_array(text) == want


@pytest.mark.parametrize("text", ["", "a-b", "5-1", "0-9:0", "0-3%0", "0-3%", "-1", "0-999999999", "1,,2"])
def test_invalid_arrays(text: str) -> None:
    with pytest.raises(ValueError):
        parse_array(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("B:USR1@90", "B:USR1@90"),
        ("USR1", "USR1@60"),
        ("SIGTERM@30", "TERM@30"),
        ("10@5", "USR1@5"),
        ("RB:usr2@600", "RB:USR2@600"),
    ],
)
def test_signals(text: str, want: str) -> None:
    assert parse_signal(text).normalised() == want


@pytest.mark.parametrize("text", ["", "X:USR1", "NOSUCH", "USR1@", "USR1@70000", "999"])
def test_invalid_signals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_signal(text)
