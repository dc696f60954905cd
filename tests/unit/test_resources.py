"""ResourceVector: memory parsing, arithmetic, typed GPUs, network classes and describe()."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from meta.model.resources import ZERO, ResourceError, ResourceVector, format_memory, parse_memory_mib

GIB = 1024
TIB = 1024 * 1024


def rv(**fields: object) -> ResourceVector:
    return ResourceVector(**fields)


# --- memory parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("256Gi", 256 * GIB),
        ("256G", 256 * GIB),
        ("256gb", 256 * GIB),
        ("256GiB", 256 * GIB),
        ("4000M", 4000),
        ("4000Mi", 4000),
        ("4000mb", 4000),
        ("1.5T", 1536 * GIB),
        ("1.5Ti", int(1.5 * TIB)),
        ("2tb", 2 * TIB),
        ("2048K", 2),
        ("2048KiB", 2),
        ("100", 100),  # bare numbers are MiB, as Slurm's --mem
        ("0", 0),
        (" 16 G ", 16 * GIB),
        ("0.5G", 512),
    ],
)
def test_memory_strings(text: str, mib: int) -> None:
    assert parse_memory_mib(text) == mib


@pytest.mark.parametrize(("number", "mib"), [(0, 0), (100, 100), (4096, 4096), (1024.9, 1024)])
def test_memory_numbers_are_mib(number: float, mib: int) -> None:
    assert parse_memory_mib(number) == mib


@pytest.mark.parametrize(
    "bad",
    ["", "  ", "G", "lots", "12Q", "5X", "1e3", "1,5G", "-5", "-1G", "1.G", "4 0 G", "GiB16"],
)
def test_memory_bad_strings(bad: str) -> None:
    with pytest.raises(ValueError, match="cannot parse memory size"):
        parse_memory_mib(bad)


@pytest.mark.parametrize("negative", [-1, -0.5, -4096])
def test_memory_negative_numbers(negative: float) -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_memory_mib(negative)


@pytest.mark.parametrize("flag", [True, False])
def test_memory_booleans_are_refused(flag: bool) -> None:
    # YAML's `memory: yes`/`true` must not become 1 MiB (or 0 MiB)
    with pytest.raises(ValueError, match="boolean"):
        parse_memory_mib(flag)
    with pytest.raises(ValidationError):
        rv(memory=flag)


@pytest.mark.parametrize("other", [None, [1], {"G": 1}, b"16G"])
def test_memory_other_types_refused(other: object) -> None:
    with pytest.raises(ValueError):
        parse_memory_mib(other)


def test_memory_alias_and_field_name_both_accepted() -> None:
    assert rv(memory="2Gi").memory_mib == 2 * GIB
    assert rv(memory_mib="2Gi").memory_mib == 2 * GIB


def test_memory_validation_error_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        rv(memory="12Q")
    assert info.value.errors()[0]["loc"] == ("memory",)


def test_memory_infinity_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        rv(memory=float("inf"))


@pytest.mark.parametrize(
    ("mib", "text"),
    [
        (0, "0M"),
        (1, "1M"),
        (4000, "4000M"),
        (1024, "1G"),
        (256 * GIB, "256G"),
        (TIB, "1T"),
        (1536 * GIB, "1536G"),
    ],
)
def test_format_memory(mib: int, text: str) -> None:
    assert format_memory(mib) == text
    assert parse_memory_mib(text) == mib


# --- the model itself -------------------------------------------------------------------------


def test_defaults_are_zero() -> None:
    assert ZERO.is_zero()
    assert ZERO == ResourceVector()
    assert ZERO.gpu_type is None and ZERO.network is None


def test_vector_is_frozen_and_strict() -> None:
    vector = rv(cpus=4)
    with pytest.raises(ValidationError):
        vector.cpus = 8  # type: ignore[misc]
    with pytest.raises(ValidationError):
        rv(cpu=4)  # typo of cpus


@pytest.mark.parametrize("field", ["cpus", "gpus", "memory", "storage"])
def test_negative_amounts_refused(field: str) -> None:
    with pytest.raises(ValidationError):
        rv(**{field: -1})


def test_gpu_type_is_normalised() -> None:
    assert rv(gpus=1, gpu_type=" A100 ").gpu_type == "a100"
    assert rv(gpus=1, gpu_type="   ").gpu_type is None


def test_storage_accepts_sizes_in_gib() -> None:
    assert rv(storage=100).storage_gib == 100
    assert rv(storage="1Ti").storage_gib == 1024
    assert rv(storage="500Gi").storage_gib == 500


def test_storage_unitless_string_means_the_same_as_the_number() -> None:
    assert rv(storage="100").storage_gib == rv(storage=100).storage_gib


# --- arithmetic -------------------------------------------------------------------------------


def test_add_sums_every_amount() -> None:
    a = rv(cpus=8, memory="64Gi", gpus=4, gpu_type="a100", storage=10)
    b = rv(cpus=2.5, memory="1Gi", gpus=4, gpu_type="a100", storage=5, network="ib")
    total = a + b
    assert (total.cpus, total.memory_mib, total.gpus, total.gpu_type, total.storage_gib) == (
        10.5,
        65 * GIB,
        8,
        "a100",
        15,
    )
    assert total.network == "ib"


def test_add_keeps_the_typed_side_when_the_other_has_no_gpus() -> None:
    cpu_only = rv(cpus=2)
    typed = rv(gpus=1, gpu_type="h100")
    assert (cpu_only + typed).gpu_type == "h100"
    assert (typed + cpu_only).gpu_type == "h100"
    assert (typed + cpu_only).gpus == 1


def test_add_zero_is_identity() -> None:
    a = rv(cpus=3, memory=100, gpus=2, gpu_type="t4", storage=7)
    assert (a + ZERO) == a
    assert (ZERO + a) == a


def test_adding_different_gpu_types_raises() -> None:
    with pytest.raises(ResourceError, match="a100.*h100"):
        rv(gpus=8, gpu_type="a100") + rv(gpus=8, gpu_type="h100")


def test_resource_error_is_a_value_error() -> None:
    assert issubclass(ResourceError, ValueError)


def test_subtract() -> None:
    capacity = rv(cpus=64, memory="512Gi", gpus=8, gpu_type="h100", storage=1000, network="ib")
    used = rv(cpus=16, memory="128Gi", gpus=3, gpu_type="h100", storage=100)
    free = capacity - used
    assert (free.cpus, free.memory_mib, free.gpus, free.gpu_type, free.storage_gib, free.network) == (
        48,
        384 * GIB,
        5,
        "h100",
        900,
        "ib",
    )
    assert (free + used) == capacity


def test_subtract_to_exactly_zero() -> None:
    a = rv(cpus=4, memory=10, gpus=2, gpu_type="a100", storage=1)
    assert (a - a).is_zero()


@pytest.mark.parametrize(
    ("request_fields", "negative"),
    [
        ({"cpus": 65}, "cpus"),
        ({"memory": "513Gi"}, "memory_mib"),
        ({"gpus": 9, "gpu_type": "h100"}, "gpus"),
        ({"storage": 1001}, "storage_gib"),
    ],
)
def test_subtraction_never_goes_negative(request_fields: dict[str, object], negative: str) -> None:
    capacity = rv(cpus=64, memory="512Gi", gpus=8, gpu_type="h100", storage=1000)
    with pytest.raises(ResourceError, match=negative):
        capacity - rv(**request_fields)


def test_subtracting_other_gpu_type_raises() -> None:
    with pytest.raises(ResourceError):
        rv(gpus=8, gpu_type="h100") - rv(gpus=1, gpu_type="a100")


def test_untyped_request_can_be_taken_from_typed_capacity() -> None:
    capacity = rv(cpus=64, gpus=8, gpu_type="h100")
    request = rv(cpus=8, gpus=2)
    assert request.fits_in(capacity)
    free = capacity - request
    assert (free.gpus, free.gpu_type) == (6, "h100")


def test_scale() -> None:
    per_worker = rv(cpus=16, memory="128Gi", gpus=8, gpu_type="a100", storage=50, network="ib")
    gang = per_worker.scale(4)
    assert (gang.cpus, gang.memory_mib, gang.gpus, gang.gpu_type, gang.storage_gib, gang.network) == (
        64,
        512 * GIB,
        32,
        "a100",
        200,
        "ib",
    )
    assert per_worker.scale(1) == per_worker
    assert per_worker.scale(0).is_zero()
    assert per_worker.scale(3) == per_worker + per_worker + per_worker


# --- fits_in ----------------------------------------------------------------------------------

H100_NODE = ResourceVector(cpus=96, memory="1Ti", gpus=8, gpu_type="h100", storage=2000, network="ib")


@pytest.mark.parametrize(
    ("request_fields", "fits"),
    [
        ({"cpus": 96, "memory": "1Ti", "gpus": 8, "gpu_type": "h100", "storage": 2000}, True),
        ({"cpus": 97}, False),
        ({"memory": "1025Gi"}, False),
        ({"gpus": 9, "gpu_type": "h100"}, False),
        ({"storage": 2001}, False),
        ({"gpus": 1, "gpu_type": "a100"}, False),  # wrong model, however few
        ({"gpus": 8}, True),  # untyped: any model
        ({"gpus": 9}, False),  # untyped but too many
        ({"gpus": 0, "gpu_type": "a100"}, True),  # a type without GPUs asks for nothing typed
        ({"cpus": 1, "network": "ib"}, True),
        ({"cpus": 1, "network": "roce"}, False),
        ({}, True),
    ],
)
def test_fits_in_h100_node(request_fields: dict[str, object], fits: bool) -> None:
    assert rv(**request_fields).fits_in(H100_NODE) is fits


def test_a100_request_does_not_fit_h100_capacity_even_when_small() -> None:
    assert not rv(gpus=1, gpu_type="a100").fits_in(rv(gpus=64, gpu_type="h100"))
    assert rv(gpus=1, gpu_type="a100").fits_in(rv(gpus=64, gpu_type="a100"))


def test_untyped_request_fits_any_type() -> None:
    request = rv(gpus=2)
    for model in ("a100", "h100", "t4"):
        assert request.fits_in(rv(gpus=2, gpu_type=model))
    assert request.fits_in(rv(gpus=2))  # an untyped pool


def test_gpu_request_does_not_fit_a_cpu_only_node() -> None:
    assert not rv(gpus=1).fits_in(rv(cpus=128, memory="1Ti"))
    assert rv(cpus=4).fits_in(rv(cpus=128, memory="1Ti"))


def test_network_class_required_by_request() -> None:
    plain = rv(cpus=8)
    ib = rv(cpus=8, network="ib")
    assert not ib.fits_in(plain)
    assert ib.fits_in(ib)
    assert plain.fits_in(ib)  # no network asked for: any node


# --- describe ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({}, "nothing"),
        ({"cpus": 8, "memory": "64Gi", "gpus": 4, "gpu_type": "a100"}, "8 cpu, 64G, 4×a100"),
        ({"cpus": 1.5, "memory": 1536, "storage": 10, "network": "ib"}, "1.5 cpu, 1536M, 10G disk, ib"),
        ({"gpus": 2}, "2×gpu"),
        ({"memory": "2Ti"}, "2T"),
    ],
)
def test_describe(fields: dict[str, object], text: str) -> None:
    assert rv(**fields).describe() == text
