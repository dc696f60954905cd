"""Network faults between the hosts of ``deploy/site``: cut, loss and delay, always healed.

The site's hosts are network namespaces on one bridge (``deploy/site``): ``ms-head1``,
``ms-head2``, ``ms-db``, ``ms-login``, and the root namespace at 10.77.0.1 where slurmctld,
slurmdbd and the slurmds (the compute side) run. A fault is made inside the namespaces, never
in the root namespace (the dev cluster and CI live there):

- ``cut(a, b, one_way=False, data_only=False)``: nftables rules (table ``inet msfault`` in each
  namespace side) that drop the packets between a and b — both directions, or only a→b; with
  ``data_only`` only packets carrying data (handshakes pass: a request arrives, its answer not). ``controller`` is
  10.77.0.1 on slurmctld's and slurmdbd's ports (6817, 6819), ``compute`` 10.77.0.1 on the API
  port (9465: jobs calling a head), so cutting one never cuts the other.
- ``loss(ns, pct, both_ways=False)``: an nftables ``numgen random`` rule dropping ``pct``% of the
  packets leaving the host's link (as ``netem loss`` on its egress), and as many of those
  entering it when ``both_ways``.
- ``delay(ns, ms)``: ``tc qdisc ... netem delay`` on the host's link (its egress: every round trip
  of the host gains ``ms``). Where the kernel has no ``sch_netem`` (the machine this was built
  on: CONFIG_NET_SCH_NETEM unset, no modules) the same is done with an iptables NFQUEUE rule
  and ``deploy/lib/nfq-delay``, which holds each packet ``ms`` and lets it go in order.

``heal()`` undoes everything this object did, in reverse order, and tries every step even when
one fails. Every command has a timeout and every wait a bound. The fixture ``network`` (see
``tests/faults/site.py``) heals in its finally, so a failing test leaves no fault behind; and
``deploy/site down`` removes the namespaces with whatever they hold.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NFQ_DELAY = REPO / "deploy" / "lib" / "nfq-delay"
GATEWAY = "10.77.0.1"
API_PORT = 9465
SLURM_PORTS = (6817, 6819)  # slurmctld, slurmdbd
TABLE = "msfault"
COMMAND_TIMEOUT_S = 20.0
DELAYER_BOUND_S = 1800.0  # a delayer whose test died exits on its own after this long


@dataclass(frozen=True)
class Endpoint:
    """Endpoint is one side of a link: a namespace (None: the root namespace), its address, the ports that make it."""

    name: str
    ns: str | None
    address: str
    ports: tuple[int, ...] = ()  # empty: all traffic to and from the address


ENDPOINTS = {
    "ms-head1": Endpoint("ms-head1", "ms-head1", "10.77.0.11"),
    "ms-head2": Endpoint("ms-head2", "ms-head2", "10.77.0.12"),
    "ms-db": Endpoint("ms-db", "ms-db", "10.77.0.20"),
    "ms-login": Endpoint("ms-login", "ms-login", "10.77.0.30"),
    # the root namespace holds both: the controller is its Slurm ports, compute its calls to the API
    "controller": Endpoint("controller", None, GATEWAY, SLURM_PORTS),
    "compute": Endpoint("compute", None, GATEWAY, (API_PORT,)),
}


class FaultError(RuntimeError):
    """FaultError: a fault could not be made or undone; the message names the command and its output."""


def run(argv: list[str], timeout: float = COMMAND_TIMEOUT_S, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """run runs one command with a timeout and raises FaultError when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as exc:
        raise FaultError(f"timed out after {timeout:.0f}s: {' '.join(argv)}") from exc
    if done.returncode != 0:
        raise FaultError(f"{' '.join(argv)} (exit {done.returncode}): {(done.stderr or done.stdout).strip()}")
    return done


def endpoint(name: str) -> Endpoint:
    """endpoint is the named side of a link (a site host, ``controller`` or ``compute``)."""
    try:
        return ENDPOINTS[name]
    except KeyError:
        raise ValueError(f"unknown host {name!r}: one of {', '.join(ENDPOINTS)}") from None


# an IPv4 packet longer than this carries data: a SYN, SYN-ACK, ACK or FIN with its options is 60 bytes at most
DATA_LENGTH = 100


def drop_rules(peer: Endpoint, ports: tuple[int, ...], direction: str, data_only: bool = False) -> list[str]:
    """drop_rules are the nft rules (after ``add rule inet msfault <chain>``) dropping packets to or from ``peer``."""
    where = "daddr" if direction == "out" else "saddr"
    match = f"ip {where} {peer.address}" + (f" ip length > {DATA_LENGTH}" if data_only else "")
    if not ports:
        return [f"{match} counter drop"]
    wanted = "{ " + ", ".join(str(p) for p in ports) + " }"
    # either end's port: the service's port is the destination one way and the source the other
    return [f"{match} tcp dport {wanted} counter drop", f"{match} tcp sport {wanted} counter drop"]


def reachable(ns: str, address: str, port: int, timeout_s: float = 3.0) -> bool:
    """reachable tells whether a TCP connection from namespace ``ns`` to address:port opens within the timeout."""
    code = (f"import socket,sys\ntry:\n socket.create_connection(({address!r},{port}),{timeout_s}).close()\n"
            f"except OSError:\n sys.exit(1)")
    try:
        done = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True,
                              timeout=timeout_s + 10)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@dataclass
class Network:
    """Network makes faults between the site's hosts and remembers how to undo each one."""

    undo: list[tuple[str, Callable[[], None]]] = field(default_factory=list)
    tables: set[str] = field(default_factory=set)  # namespaces holding our nft table
    netem_missing: bool | None = None  # learned on the first delay
    log: list[str] = field(default_factory=list)  # what was done, for the test's report

    # --- making faults -----------------------------------------------------------------------

    def _table(self, ns: str) -> None:
        """_table creates our nft table with an input and an output chain in ``ns`` (once)."""
        if ns in self.tables:
            return
        ruleset = (f"table inet {TABLE} {{\n"
                   f"  chain out {{\n    type filter hook output priority -10; policy accept;\n  }}\n"
                   f"  chain in {{\n    type filter hook input priority -10; policy accept;\n  }}\n}}\n")
        run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=ruleset)
        self.tables.add(ns)
        self.undo.append((f"delete nft table in {ns}", lambda: run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", TABLE])))

    def _add(self, ns: str, chain: str, rule: str) -> None:
        """_add appends one rule to our chain in ``ns`` (removed with the table by heal)."""
        self._table(ns)
        run(["ip", "netns", "exec", ns, "nft", "add", "rule", "inet", TABLE, chain, *rule.split()])

    def cut(self, a: str, b: str, one_way: bool = False, data_only: bool = False) -> None:
        """cut drops the packets between hosts a and b (only those from a to b when ``one_way``).

        ``data_only`` drops only packets that carry data: connections still open, so with
        ``one_way`` from a server to its client a request arrives and its answer is lost.
        """
        src, dst = endpoint(a), endpoint(b)
        if src.ns is None and dst.ns is None:
            raise ValueError("both ends are the root namespace: faults are made inside the site's namespaces only")
        ports = tuple(sorted(set(src.ports) | set(dst.ports)))
        # a→b: in a's output where a is a namespace, else in b's input
        if src.ns is not None:
            for rule in drop_rules(dst, ports, "out", data_only):
                self._add(src.ns, "out", rule)
        else:
            assert dst.ns is not None
            for rule in drop_rules(src, ports, "in", data_only):
                self._add(dst.ns, "in", rule)
        if not one_way:
            # b→a as well, on both namespace sides: a reply never leaves and never arrives
            if dst.ns is not None:
                for rule in drop_rules(src, ports, "out", data_only):
                    self._add(dst.ns, "out", rule)
            if src.ns is not None:
                for rule in drop_rules(dst, ports, "in", data_only):
                    self._add(src.ns, "in", rule)
        self.log.append(f"cut {a} {'->' if one_way else '<->'} {b}" + (f" (tcp ports {ports})" if ports else "")
                        + (" (data only)" if data_only else ""))

    def loss(self, ns: str, pct: float, both_ways: bool = False) -> None:
        """loss drops ``pct``% of the packets leaving host ``ns``'s link (and, apart, of those entering it when ``both_ways``)."""
        if endpoint(ns).ns is None:
            raise ValueError("loss is made on a site namespace's link, never the root namespace's")
        if not 0 < pct < 100:
            raise ValueError("pct must be between 0 and 100")
        self._add(ns, "out", f'oifname "eth0" numgen random mod 100 < {int(round(pct))} counter drop')
        if both_ways:
            self._add(ns, "in", f'iifname "eth0" numgen random mod 100 < {int(round(pct))} counter drop')
        self.log.append(f"loss {pct:g}% on {ns} {'each way' if both_ways else 'egress'}")

    def delay(self, ns: str, ms: int) -> None:
        """delay holds every packet leaving host ``ns``'s link for ``ms`` (netem, else NFQUEUE and nfq-delay)."""
        if endpoint(ns).ns is None:
            raise ValueError("delay is made on a site namespace's link, never the root namespace's")
        if not 0 < ms <= 60_000:
            raise ValueError("ms must be between 1 and 60000")
        if self.netem_missing is not True:
            try:
                run(["tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "netem", "delay", f"{ms}ms"])
                self.netem_missing = False
                self.undo.append((f"remove netem on {ns}", lambda: run(["tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"])))
                self.log.append(f"delay {ms} ms on {ns} egress (netem)")
                return
            except FaultError as exc:
                if "unknown" not in str(exc).lower():
                    raise
                self.netem_missing = True
        self._delay_nfqueue(ns, ms)

    def _delay_nfqueue(self, ns: str, ms: int) -> None:
        """_delay_nfqueue sends the link's outgoing packets to a queue that nfq-delay releases ``ms`` later."""
        queue = 100 + sorted(e for e in ENDPOINTS if ENDPOINTS[e].ns).index(ns)
        proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, str(NFQ_DELAY), "--queue", str(queue),
                                 "--delay-ms", str(ms), "--seconds", str(DELAYER_BOUND_S)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def stop() -> None:
            """stop ends this delayer by its pid (TERM, then KILL), bounded."""
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)

        self.undo.append((f"stop nfq-delay in {ns}", stop))
        assert proc.stdout is not None
        first = proc.stdout.readline()  # it prints once bound to the queue (or dies saying why)
        if "nfq-delay: queue" not in first:
            stop()
            raise FaultError(f"nfq-delay did not start in {ns}: {first.strip()}")
        rule = ["OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
        run(["ip", "netns", "exec", ns, "iptables", "-A", *rule])
        # the rule goes before the delayer stops (undo runs in reverse): no packet waits on a dead queue
        self.undo.append((f"remove NFQUEUE rule in {ns}", lambda: run(["ip", "netns", "exec", ns, "iptables", "-D", *rule])))
        self.log.append(f"delay {ms} ms on {ns} egress (NFQUEUE + nfq-delay: no sch_netem in this kernel)")

    # --- undoing them ------------------------------------------------------------------------

    def heal(self) -> None:
        """heal undoes every fault, newest first; it tries every step and raises FaultError afterwards if one failed."""
        failures = []
        while self.undo:
            what, step = self.undo.pop()
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every other step must still run
                failures.append(f"{what}: {exc}")
        self.tables.clear()
        if failures:
            raise FaultError("; ".join(failures))
        self.log.append("healed")

    def active(self) -> bool:
        """active tells whether some fault is in place."""
        return bool(self.undo)


def wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.1) -> float | None:
    """wait_until polls the predicate until it holds (seconds taken) or the bound passes (None)."""
    started = time.monotonic()
    while time.monotonic() - started <= timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(poll_s)
    return None
