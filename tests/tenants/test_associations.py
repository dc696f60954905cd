"""Slurm's associations: parsing what sacctmgr 22.05 printed on the dev cluster, the cache, principal_for."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmParseError, SlurmTransient
from slurm_bridge.fake import FakeSlurm
from slurm_bridge.parse.config import parse_show_config
from slurm_bridge.parse.sacctmgr import (
    MAX_QOS_PER_ASSOCIATION,
    USER_FIELDS,
    account_shares_args,
    gpu_limits,
    parse_account_shares,
    parse_user_associations,
    user_associations_args,
)
from tenants.associations import AccountingUnavailable, AssociationCache
from tenants.auth import Identity
from tenants.identity import INVALID_ACCOUNT, InvalidAccount

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- parsing (captured by deploy/lib/capture-slurm-fixtures) ---------------------------------


def test_users_parse_from_the_captured_output() -> None:
    users = {u.user: u for u in parse_user_associations(_fixture("sacctmgr-users.txt"))}
    assert set(users) >= {"alice", "bob", "carol", "dave", "oscar", "root"}
    assert users["alice"].accounts() == {"tenant-a"} and users["alice"].default_account == "tenant-a"
    assert users["carol"].accounts() == {"tenant-a", "tenant-b"} and users["carol"].default_account == "tenant-a"
    assert users["dave"].coordinates == {"tenant-a"} and users["dave"].admin_level == "None"
    assert users["oscar"].admin_level == "Operator" and users["oscar"].accounts("emu") == {"research"}
    assert users["root"].admin_level == "Administrator"
    assert users["alice"].accounts("another-cluster") == frozenset()


def test_a_coordinator_of_several_accounts_and_a_user_without_associations() -> None:
    # as 22.05 printed them on the dev cluster (dave briefly coordinating research too; a user
    # asked for on a cluster where it has no association)
    text = "dave|tenant-a|None|research,tenant-a|emu|tenant-a\nerin||None|||\n"
    users = {u.user: u for u in parse_user_associations(text)}
    assert users["dave"].coordinates == {"research", "tenant-a"}
    assert users["erin"].accounts() == frozenset() and users["erin"].default_account == ""


def test_association_qos_parse_from_the_captured_output() -> None:
    # sacctmgr 22.05 on the dev cluster with QOS in the format (2026-12-05): every association allows high,low,normal
    text = _fixture("sacctmgr-users-qos.txt")
    assert all(len(line.split("|")) == len(USER_FIELDS) for line in text.splitlines() if line)
    users = {u.user: u for u in parse_user_associations(text)}
    assert users["alice"].qos("tenant-a") == {"high", "low", "normal"}
    assert users["carol"].qos("tenant-b", "emu") == {"high", "low", "normal"}
    assert users["alice"].qos("tenant-b") == frozenset() and users["alice"].qos("tenant-a", "other") == frozenset()
    assert users["carol"].accounts() == {"tenant-a", "tenant-b"} and users["dave"].coordinates == {"tenant-a"}


def test_qos_is_per_association_and_the_older_read_has_none() -> None:
    text = "carol|tenant-a|None||emu|tenant-a|normal,inference-deadline\ncarol|tenant-a|None||emu|tenant-b|\n"
    [carol] = parse_user_associations(text)
    assert carol.qos("tenant-a") == {"normal", "inference-deadline"} and carol.qos("tenant-b") == frozenset()
    [alice] = parse_user_associations("alice|tenant-a|None||emu|tenant-a\n")  # six fields: before QOS was read
    assert alice.accounts() == {"tenant-a"} and alice.qos("tenant-a") == frozenset()
    [trailing] = parse_user_associations("alice|tenant-a|None||emu|tenant-a|high,low|\n")  # a trailing separator
    assert trailing.qos("tenant-a") == {"high", "low"}


@pytest.mark.parametrize(
    "qos",
    [
        "normal,bad name",  # not a Slurm name
        "normal,$(reboot)",
        ",".join(f"q{i}" for i in range(MAX_QOS_PER_ASSOCIATION + 1)),  # more than a site has
    ],
)
def test_odd_qos_fields_are_parse_errors(qos: str) -> None:
    with pytest.raises(SlurmParseError):
        parse_user_associations(f"alice|tenant-a|None||emu|tenant-a|{qos}\n")


def test_account_shares_parse_from_the_captured_output() -> None:
    shares = {s.account: s for s in parse_account_shares(_fixture("sacctmgr-shares.txt"))}
    assert set(shares) == {"root", "prod", "research", "tenant-a", "tenant-b"}  # account rows only
    assert (shares["tenant-a"].fairshare, shares["tenant-b"].fairshare) == (70, 30)
    assert shares["tenant-a"].gpu_limits == {"a100": 16}
    assert shares["tenant-b"].gpu_limits == {"*": 40}
    assert shares["research"].gpu_limits == {} and shares["research"].parent == "root"


def test_the_config_names_the_cluster_and_the_slurm_user() -> None:
    config = parse_show_config(_fixture("scontrol-show-config.txt"))
    assert (config.cluster_name, config.slurm_user, config.slurm_user_uid) == ("emu", "slurm", 64030)


@pytest.mark.parametrize(
    ("grp_tres", "want"),
    [
        ("", {}),
        ("cpu=100,mem=1000M", {}),
        ("gres/gpu:a100=32,gres/gpu=64,cpu=8", {"a100": 32, "*": 64}),
        ("gres/gpu:H100=4", {"h100": 4}),
        ("gres/gpu=0", {"*": 0}),
        ("gres/gpumem=80G,gres/gpu:t4=2", {"t4": 2}),
    ],
)
def test_gpu_limits_come_from_grptres(grp_tres: str, want: dict[str, int]) -> None:
    assert gpu_limits(grp_tres) == want


@pytest.mark.parametrize(
    "text",
    [
        "alice|tenant-a|None|emu|tenant-a\n",  # a field short
        "alice|tenant-a|Superuser||emu|tenant-a\n",  # an AdminLevel Slurm does not have
    ],
)
def test_odd_user_lines_are_parse_errors(text: str) -> None:
    with pytest.raises(SlurmParseError):
        parse_user_associations(text)


@pytest.mark.parametrize("text", ["emu|a||lots||root\n", "emu|a||1|gres/gpu=many|root\n", "emu|a|1\n"])
def test_odd_share_lines_are_parse_errors(text: str) -> None:
    with pytest.raises(SlurmParseError):
        parse_account_shares(text)


def test_parent_fairshare_is_no_weight_of_its_own() -> None:
    [share] = parse_account_shares("emu|child||parent||tenant-a\n")
    assert share.fairshare is None


def test_the_reads_are_argv_lists_that_name_the_user_safely() -> None:
    assert user_associations_args("alice")[:5] == ["-n", "-P", "show", "user", "name=alice"]
    assert "withcoord" in user_associations_args() and "withassoc" in user_associations_args()
    assert account_shares_args()[:4] == ["-n", "-P", "show", "assoc"]
    assert user_associations_args("alice")[-1].split("=")[1].split(",")[-1] == "QOS"  # what priority rights read
    assert user_associations_args("withassoc")[4] == "name=withassoc"  # a keyword is only a name here
    for bad in ("a,b", "x=y", "-h", "a b", ""):
        with pytest.raises(ValueError):
            user_associations_args(bad)


# --- the cache ---------------------------------------------------------------------------------


class Clock:
    """Clock is a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slurm() -> FakeSlurm:
    fake = FakeSlurm()
    fake.add_user("alice", ["tenant-a"])
    fake.add_user("bob", ["tenant-b"])
    fake.add_user("carol", ["tenant-a", "tenant-b"], default="tenant-a")
    fake.add_user("dave", ["tenant-a"], coordinates=["tenant-a"])
    fake.add_user("oscar", ["research"], admin_level="Operator")
    for account, share in (("tenant-a", 70), ("tenant-b", 30), ("research", 1)):
        fake.set_account(account, share)
    return fake


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(slurm: FakeSlurm, clock: Clock) -> AssociationCache:
    return AssociationCache(slurm, ttl_s=60, miss_interval_s=1, clock=clock)


def _id(name: str, uid: int) -> Identity:
    return Identity(uid=uid, gid=uid, user=name)


ALICE, BOB, CAROL, DAVE, OSCAR = (_id("alice", 2001), _id("bob", 2002), _id("carol", 2003), _id("dave", 2004),
                                  _id("oscar", 2005))


def test_a_user_is_read_once_per_ttl(cache: AssociationCache, slurm: FakeSlurm, clock: Clock) -> None:
    for _ in range(5):
        cache.principal_for(ALICE, "tenant-a")
    assert slurm.calls["user_associations"] == 1
    clock.now += 59
    cache.principal_for(ALICE)
    assert slurm.calls["user_associations"] == 1
    clock.now += 2
    cache.principal_for(ALICE)
    assert slurm.calls["user_associations"] == 2


def test_an_account_added_in_slurm_is_seen_on_the_next_miss(
    cache: AssociationCache, slurm: FakeSlurm, clock: Clock
) -> None:
    assert cache.principal_for(ALICE).accounts == {"tenant-a"}
    slurm.add_user("alice", ["tenant-a", "tenant-b"])
    with pytest.raises(InvalidAccount):  # within the miss interval: the cached set answers
        cache.principal_for(ALICE, "tenant-b")
    clock.now += 1.5
    assert cache.principal_for(ALICE, "tenant-b").tenant == "tenant-b"  # a miss: read again
    assert slurm.calls["user_associations"] == 2


def test_a_refused_tenant_does_not_hammer_slurmdbd(cache: AssociationCache, slurm: FakeSlurm, clock: Clock) -> None:
    cache.principal_for(BOB)
    for _ in range(50):
        with pytest.raises(InvalidAccount):
            cache.principal_for(BOB, "tenant-a")
    assert slurm.calls["user_associations"] == 1
    clock.now += 1.5
    with pytest.raises(InvalidAccount):
        cache.principal_for(BOB, "tenant-a")
    assert slurm.calls["user_associations"] == 2


def test_a_user_unknown_to_slurm_has_no_tenant_and_is_read_again_on_a_miss(
    cache: AssociationCache, slurm: FakeSlurm, clock: Clock
) -> None:
    erin = _id("erin", 2010)
    nobody = cache.principal_for(erin)
    assert nobody.accounts == frozenset() and not nobody.is_admin and nobody.visible_tenants() == frozenset()
    with pytest.raises(InvalidAccount, match=INVALID_ACCOUNT):
        cache.principal_for(erin, "tenant-a")
    slurm.add_user("erin", ["tenant-a"])
    clock.now += 1.5
    assert cache.principal_for(erin, "tenant-a").is_member("tenant-a")


def test_the_refusal_is_in_sbatchs_words(cache: AssociationCache) -> None:
    with pytest.raises(InvalidAccount) as caught:
        cache.principal_for(ALICE, "tenant-b")
    assert str(caught.value) == "Invalid account or account/partition combination specified: tenant-b"
    assert caught.value.exit_code == 2


def test_principals_carry_what_slurm_says(cache: AssociationCache) -> None:
    carol = cache.principal_for(CAROL)
    assert (carol.name, carol.uid, carol.gid) == ("carol", 2003, 2003)
    assert carol.accounts == {"tenant-a", "tenant-b"} and carol.default_account == "tenant-a"
    assert carol.tenant is None and not carol.is_admin
    assert cache.principal_for(CAROL, "tenant-b").tenant == "tenant-b"
    assert cache.principal_for(DAVE).coordinates == {"tenant-a"}
    assert cache.principal_for(OSCAR).is_admin


def test_principals_carry_each_associations_qos(cache: AssociationCache, slurm: FakeSlurm) -> None:
    slurm.add_user("erin", ["tenant-a"], qos=["normal", "inference-deadline"])
    slurm.users["carol"] = type(slurm.users["carol"])(
        user="carol", default_account="tenant-a", admin_level="None", coordinates=frozenset(),
        associations=frozenset({("fake", "tenant-a"), ("fake", "tenant-b")}),
        association_qos=frozenset({("fake", "tenant-a", "inference-deadline"), ("fake", "tenant-b", "normal"),
                                   ("other", "tenant-b", "inference-deadline")}),
    )  # fmt: skip
    cache.forget()
    carol = cache.principal_for(CAROL)
    assert carol.qos_in("tenant-a") == {"inference-deadline"}
    assert carol.qos_in("tenant-b") == {"normal"}  # another cluster's association does not count
    assert cache.principal_for(CAROL, "tenant-a").qos_in("tenant-a") == {"inference-deadline"}  # scoped keeps it
    assert cache.principal_for(ALICE).qos_in("tenant-a") == frozenset()
    assert cache.principal_for(_id("erin", 2012)).qos_in("tenant-a") == {"normal", "inference-deadline"}


@pytest.mark.parametrize(
    ("identity", "admin"),
    [
        (Identity(0, 0, "root"), True),  # uid 0, even without a Slurm user
        (Identity(64030, 64030, "slurm"), True),  # SlurmUser
        (Identity(64031, 64031, "slurm"), True),  # SlurmUser by name
        (OSCAR, True),  # AdminLevel=Operator
        (ALICE, False),
        (DAVE, False),  # a coordinator is no admin
    ],
)
def test_who_is_an_admin(cache: AssociationCache, identity: Identity, admin: bool) -> None:
    assert cache.principal_for(identity).is_admin is admin


def test_an_admin_may_act_on_any_existing_account_only(cache: AssociationCache, slurm: FakeSlurm, clock: Clock) -> None:
    assert cache.principal_for(OSCAR, "tenant-b").tenant == "tenant-b"
    assert cache.principal_for(Identity(0, 0, "root"), "tenant-a").tenant == "tenant-a"
    with pytest.raises(InvalidAccount):
        cache.principal_for(OSCAR, "no-such-account")
    slurm.set_account("prod", 1)
    clock.now += 1.5
    assert cache.principal_for(OSCAR, "prod").tenant == "prod"  # a new account: read again on the miss


def test_an_admins_submit_names_an_account_slurm_has(cache: AssociationCache, slurm: FakeSlurm, clock: Clock) -> None:
    # the tenant of a job file is not asked for as --tenant: the principal checks it at submit
    for admin in (cache.principal_for(OSCAR), cache.principal_for(Identity(0, 0, "root"))):
        assert admin.may_submit("tenant-b") and admin.scoped(None).may_submit("research")
        assert not admin.may_submit("nosuch")
    assert not cache.principal_for(ALICE).may_submit("nosuch")
    slurm.set_account("nosuch", 1)
    clock.now += 1.5
    assert cache.principal_for(OSCAR).may_submit("nosuch")  # a new account: read again on the miss


def test_associations_on_another_cluster_do_not_count(cache: AssociationCache, slurm: FakeSlurm) -> None:
    user = slurm.add_user("frank", ["tenant-a"])
    slurm.users["frank"] = type(user)(
        user="frank", default_account="tenant-a", admin_level="None", coordinates=frozenset(),
        associations=frozenset({("other", "tenant-a"), ("fake", "research")}),
    )
    assert cache.principal_for(_id("frank", 2011)).accounts == {"research"}


def test_accounting_down_uses_the_cache_then_fails_in_one_line(
    cache: AssociationCache, slurm: FakeSlurm, clock: Clock
) -> None:
    cache.principal_for(ALICE)
    slurm.accounting_fault = SlurmTransient("sacctmgr: error: Problem talking to the database:\nConnection refused")
    clock.now += 120  # stale: read again, fails, the stale entry answers
    assert cache.principal_for(ALICE, "tenant-a").tenant == "tenant-a"
    with pytest.raises(AccountingUnavailable) as caught:
        cache.principal_for(BOB)  # nothing cached for bob
    assert "\n" not in str(caught.value) and "Connection refused" in str(caught.value)


# --- the dev cluster ------------------------------------------------------------------------


@pytest.mark.slurm
def test_principals_from_the_dev_clusters_associations(slurm_cluster: None) -> None:
    live = AssociationCache(CliSlurmClient())
    assert live.principal_for(ALICE, "tenant-a").accounts == {"tenant-a"}
    with pytest.raises(InvalidAccount, match=INVALID_ACCOUNT):
        live.principal_for(ALICE, "tenant-b")
    carol = live.principal_for(CAROL)
    assert carol.accounts == {"tenant-a", "tenant-b"} and carol.default_account == "tenant-a"
    assert live.principal_for(DAVE).coordinates == {"tenant-a"}
    assert "normal" in live.principal_for(ALICE).qos_in("tenant-a")  # the association's QOS (priority rights)
    assert live.principal_for(OSCAR, "tenant-b").is_admin  # an Operator acts on any existing account
    assert live.principal_for(Identity(64030, 64030, "slurm")).is_admin  # SlurmUser
    with pytest.raises(InvalidAccount):
        live.principal_for(OSCAR, "no-such-account")
