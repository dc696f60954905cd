"""FaultInjectingClient: failures before and after delegating, counted and consumed."""

import pytest

from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.faults import FaultInjectingClient, FaultKind
from slurm_bridge.runner import CommandRunner


@pytest.fixture
def client(fake_binary):
    inner = CliSlurmClient(CommandRunner(binaries={"sbatch": fake_binary(stdout="77\n")}))
    return FaultInjectingClient(inner)


def test_timeout_after_acceptance_submits_then_raises(client, recorded_calls):
    client.inject("submit", FaultKind.TIMEOUT_AFTER)
    with pytest.raises(SlurmUnknownOutcome):
        client.submit("#!/bin/bash\ntrue\n")
    assert len(recorded_calls()) == 1  # the job really went to (fake) Slurm
    assert client.submit("#!/bin/bash\ntrue\n") == 77  # the fault is used up


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (FaultKind.TIMEOUT_BEFORE, SlurmUnknownOutcome),
        (FaultKind.DROP, SlurmTransient),
        (FaultKind.REJECT, SlurmRejected),
    ],
)
def test_faults_before_never_reach_slurm(client, recorded_calls, kind, error):
    client.inject("submit", kind, times=2)
    for _ in range(2):
        with pytest.raises(error):
            client.submit("#!/bin/bash\ntrue\n")
    assert recorded_calls() == []
    assert client.injected == [("submit", kind), ("submit", kind)]


def test_other_methods_pass_through(client):
    client.inject("squeue", FaultKind.DROP)
    with pytest.raises(SlurmTransient):
        client.squeue()
    assert client.runner.counter.calls("sbatch") == 0
    assert client.calls == ["squeue"]
