"""The tag names the site (issue 26): round trip, tags older than sites, another site's, bounds."""

from __future__ import annotations

import pytest

from meta.model.ids import SITE_ID_LENGTH, check_site_id, new_site_id
from slurm_bridge import tags
from slurm_bridge.parse.squeue import metasched_jobs
from slurm_bridge.tags import AttemptTag, parse_tag

ATTEMPT = "3f2a9c1e-7b4d-4c1a-9e0f-2b8d5a6c7e10"


def test_a_tag_names_its_site_and_reads_back() -> None:
    comment = tags.comment("k3x9m2q7r4vd", ATTEMPT)
    assert comment == f"metasched:site=k3x9m2q7r4vd:attempt={ATTEMPT}"
    assert parse_tag("train", comment) == AttemptTag(ATTEMPT, None, "k3x9m2q7r4vd")
    assert parse_tag("x", f"metasched site=s1 attempt={ATTEMPT}") == AttemptTag(ATTEMPT, None, "s1")
    assert parse_tag("x", f"  {comment}  ").site == "k3x9m2q7r4vd"  # squeue pads some columns
    assert tags.tag_key("train", comment) == f"ms-{ATTEMPT}"  # the harnesses' key ignores the site


@pytest.mark.parametrize(
    ("name", "comment", "want"),
    [
        ("train", f"metasched:attempt={ATTEMPT}", AttemptTag(ATTEMPT, None)),  # issue 12 to 25
        ("train", f"metasched:attempt={ATTEMPT}:token=7", AttemptTag(ATTEMPT, 7)),  # before issue 12
        (f"ms-{ATTEMPT}", "", AttemptTag(ATTEMPT, None)),  # before issue 13, comment lost
        ("x", "metasched attempt=b token=3", AttemptTag("b", 3)),
    ],
)
def test_a_tag_older_than_sites_names_none(name: str, comment: str, want: AttemptTag) -> None:
    tag = parse_tag(name, comment)
    assert tag == want and tag.site is None
    assert not tag.other_site("s1")  # older than sites: not another site's (the reconciler judges it)


def test_another_sites_tag_is_told_apart() -> None:
    mine, theirs = parse_tag("a", tags.comment("prod1", "a-1")), parse_tag("b", tags.comment("stag2", "a-1"))
    assert mine is not None and theirs is not None
    assert not mine.other_site("prod1") and theirs.other_site("prod1") and mine.other_site("stag2")


@pytest.mark.parametrize(
    "site",
    ["", "K3X9", "a:b", "a=b", "a b", "-abc", "a_b", "a.b", "a" * 33, "ｓ1", "s1\n", "٣"],
)
def test_a_site_id_is_bounded_lowercase_ascii_without_separators(site: str) -> None:
    with pytest.raises(ValueError):
        check_site_id(site)
    with pytest.raises(ValueError):
        tags.comment(site, "a-1")
    # a comment with such a site is no tag at all, never one older than sites
    assert parse_tag("train", f"metasched:site={site}:attempt=a-1") is None


def test_the_longest_site_and_attempt_ids_fit() -> None:
    site, attempt = "s" * 32, "a" * 128
    assert parse_tag("x", tags.comment(site, attempt)) == AttemptTag(attempt, None, site)
    assert parse_tag("x", f"metasched:site={site}:attempt={attempt}b") is None  # attempt id over its bound
    assert parse_tag("x", f"metasched:site={site}:attempt=-a") is None
    with pytest.raises(ValueError):
        tags.comment(site, attempt + "b")


@pytest.mark.parametrize(
    "comment",
    [
        "metasched:site=s1:attempt=a-1\nmore",  # a trailing line
        "metasched:attempt=a-1:site=s1",  # the site after the attempt
        "metasched:site=s1:site=s2:attempt=a-1",
        "metasched:site=:attempt=a-1",
        "xmetasched:site=s1:attempt=a-1",
    ],
)
def test_odd_comments_are_no_tags(comment: str) -> None:
    assert parse_tag("train", comment) is None


def test_a_new_site_id_is_random_and_valid() -> None:
    drawn = {new_site_id() for _ in range(200)}
    assert len(drawn) == 200
    assert all(len(site) == SITE_ID_LENGTH and check_site_id(site) == site for site in drawn)


def test_metasched_jobs_keeps_a_site_and_tags_older_than_sites() -> None:
    class Row:
        def __init__(self, comment: str) -> None:
            self.tag = parse_tag("x", comment)

    rows = [Row(tags.comment("s1", "a")), Row(tags.comment("s2", "b")), Row("metasched:attempt=c"), Row("plain")]
    assert [r.tag.attempt_id for r in metasched_jobs(rows)] == ["a", "b", "c"]  # type: ignore[arg-type]
    assert [r.tag.attempt_id for r in metasched_jobs(rows, site="s1")] == ["a", "c"]  # type: ignore[arg-type]
