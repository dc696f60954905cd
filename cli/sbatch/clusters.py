"""clusters is ``-M/--clusters`` for msbatch, msqueue and mscancel on a site of several Slurm clusters (issue 26).

On such a site metasched names nodes and Slurm jobs ``cluster/name`` (``dev2/b-a100n1``,
``dev2/123``); with one cluster the names are bare. ``-M`` takes comma-separated cluster names,
``all`` (alone) meaning every cluster, as sbatch, squeue and scancel do.

- msbatch: the names become the spec's ``sbatch.clusters`` (empty: any cluster); with exactly
  one cluster, bare ``-w``/``-x`` names are that cluster's; with several, a bare ``-x`` name is
  excluded on each of them (sbatch applies ``-x`` on whichever cluster runs the job) and a bare
  ``-w`` name is refused (it would name a different node on each).
- msqueue and mscancel: a job is on a cluster when its nodes are; a job holding no nodes yet is
  on every cluster it may run on (its ``sbatch.clusters``, or any). Bare node names (a site of
  one cluster, whose name metasched does not know) are on whichever cluster is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click

from cli.sbatch.options import OptionValue, SbatchError
from meta.model.clusters import check_cluster_name, cluster_of, qualify, split_qualified

ALL = "all"


def clusters_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """clusters_option is msqueue's and mscancel's ``-M/--clusters`` (repeatable, or $SLURM_CLUSTERS as Slurm reads it)."""
    return click.option("-M", "--clusters", "clusters", multiple=True, envvar="SLURM_CLUSTERS", help=help_text)


def parse_clusters(text: str) -> tuple[str, ...]:
    """parse_clusters reads a ``-M`` value: names in order without repeats; ``all`` or nothing is () (any cluster)."""
    value = text.strip()
    if not value or value.lower() == ALL:
        return ()
    names = [item.strip() for item in value.split(",")]
    if any(name.lower() == ALL for name in names):
        raise ValueError("'all' stands alone: it means every cluster")
    for name in names:
        if not name:
            raise ValueError("an empty cluster name (give a,b or all)")
        check_cluster_name(name)
    return tuple(dict.fromkeys(names))


def cluster_choice(values: Sequence[str]) -> tuple[str, ...] | None:
    """cluster_choice is msqueue/mscancel's ``-M`` (already split at commas): None when not given, () for all."""
    if not values:
        return None
    return parse_clusters(",".join(values))


# --- msbatch: -w and -x on named clusters ----------------------------------------------------


def place_nodes(option: OptionValue, names: Iterable[str], clusters: tuple[str, ...],
                clusters_option: OptionValue | None) -> list[str]:  # fmt: skip
    """place_nodes qualifies ``-w``/``-x`` node names for ``-M`` (see the module docstring); SbatchError names the option."""
    placed: list[str] = []
    for name in names:
        placed += _place(option, name, clusters, clusters_option)
    return placed


def _place(
    option: OptionValue, name: str, clusters: tuple[str, ...], clusters_option: OptionValue | None
) -> list[str]:
    cluster, bare = split_qualified(name)
    required = option.name == "nodelist"  # -x only narrows where the job runs; -w must be reachable
    if cluster or not clusters:
        if cluster and clusters and cluster not in clusters and required:
            raise SbatchError([f"invalid {option.where()}: node {name} is on cluster {cluster}, "
                               f"which {_label(clusters_option)} does not name"])  # fmt: skip
        return [name]
    if len(clusters) == 1:
        return [qualify(clusters[0], bare)]
    if required:
        raise SbatchError([f"invalid {option.where()}: {_label(clusters_option)} names several clusters; "
                           f"prefix each node with its cluster, e.g. {qualify(clusters[0], bare)}"])  # fmt: skip
    return [qualify(cluster_name, bare) for cluster_name in clusters]


def _label(option: OptionValue | None) -> str:
    return option.label() if option is not None else "--clusters"


# --- msqueue and mscancel: which cluster a queue row is on -----------------------------------


def node_clusters(row: Mapping[str, Any]) -> set[str]:
    """node_clusters are the clusters of a row's nodes ('' for bare names; empty when it holds none)."""
    return {cluster_of(node) for node in row.get("nodelist") or ()}


def allowed_clusters(row: Mapping[str, Any]) -> list[str]:
    """allowed_clusters are the clusters the row's job may run on (empty: any; a service before issue 26 sends none)."""
    return list(row.get("clusters") or ())


def on_cluster(row: Mapping[str, Any], cluster: str) -> bool:
    """on_cluster tells whether a row belongs under ``cluster`` (see the module docstring)."""
    held = node_clusters(row)
    if held:
        return cluster in held or "" in held
    allowed = allowed_clusters(row)
    return not allowed or cluster in allowed


def row_cluster(row: Mapping[str, Any]) -> str:
    """row_cluster is squeue's Cluster of a row outside a ``-M`` section: its nodes' cluster, else the one it may run on."""
    held = sorted(node_clusters(row) - {""})
    if held:
        return ",".join(held)
    allowed = allowed_clusters(row)
    return allowed[0] if len(allowed) == 1 and not row.get("nodelist") else ""


def in_section(row: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """in_section is the row as shown under ``CLUSTER: cluster``: that cluster's nodes, by their bare names."""
    nodes = [
        split_qualified(node)[1] for node in row.get("nodelist") or () if cluster_of(node) in (cluster, "")
    ]
    return {**row, "nodelist": nodes, "cluster": cluster}


def seen_clusters(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """seen_clusters are the clusters rows are on or may run on, sorted: what ``-M all`` lists (no cluster list in the API)."""
    found: set[str] = set()
    for row in rows:
        found |= node_clusters(row) | set(allowed_clusters(row))
    return sorted(found - {""})
