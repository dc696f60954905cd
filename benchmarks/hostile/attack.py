"""attack: one hostile user's load on the API, run as that user (``runuser -u USER -- python3 attack.py ...``).

Every loop is bounded in count and in time. Kinds (issue 22's findings):

* ``S1``  hold up to ``--count`` idle connections open (and reopen those the service closes);
* ``S2``  inference partitions that exit 0 without committing, leaving a 4 GiB sparse file and
          ``--count`` small files in their staging folder for the daemon to read;
* ``S4``  post batches of the largest inference jobs the API takes, as fast as it answers;
* ``S8``  requests with invented HTTP methods, no credential;
* ``S9``  authenticated job-side calls with a wrong attempt proof (each one a refusal to audit);
* ``steady`` one small evaluation job every ``--every`` seconds (the others' load the periods serve).

It prints one JSON line: what it sent and how the service answered (status counts).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cli.credentials import authorization_header  # noqa: E402

STEADY_JOB = """\
kind: evaluation
name: steady
tenant: {tenant}
resources: {{cpus: 1, memory: 1Gi, gpus: 1, gpu_type: a100}}
time_limit: 5m
command: sleep 3
"""
# The largest inference job a request may carry is the service's to say: the attacker alternates
# the finding's request (100 jobs x 20,000 partitions, far past any cap) with the largest one a
# request may carry (one job of 20,000 partitions), so the daemon really holds as many pending
# tasks as the caps let one user make.
FLOOD_PARTITIONS = 20_000
FLOOD_JOBS_PER_BATCH = 100


class Api:
    """Api sends requests over the service's Unix socket, a MUNGE credential bound to each when asked."""

    def __init__(self, path: str, timeout_s: float = 30.0) -> None:
        self.path = path
        self.timeout_s = timeout_s

    def connect(self) -> socket.socket:
        """connect is a new connection to the socket."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout_s)
        sock.connect(self.path)
        return sock

    def send(self, method: str, target: str, body: bytes = b"", signed: bool = True) -> int:
        """send sends one request and returns its status (0 when the connection failed)."""
        headers = {"Content-Type": "application/json"} if body else {}
        if signed:
            headers["Authorization"] = authorization_header(method, target, body)
        connection = http.client.HTTPConnection("localhost", timeout=self.timeout_s)
        try:
            connection.sock = self.connect()
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            connection.close()


def hold_idle(api: Api, count: int, until: float) -> Counter:
    """hold_idle keeps up to ``count`` connections open that never send a byte."""
    tally: Counter = Counter()
    held: list[socket.socket] = []
    while time.monotonic() < until:
        alive = []
        for sock in held:  # a closed connection reads b"" at once
            sock.setblocking(False)
            try:
                closed = sock.recv(1) == b""
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if closed:
                tally["closed by the service"] += 1
                sock.close()
            else:
                alive.append(sock)
        held = alive
        while len(held) < count and time.monotonic() < until:
            try:
                held.append(api.connect())
                tally["opened"] += 1
            except OSError:
                tally["refused"] += 1
                break
        tally["max held"] = max(tally["max held"], len(held))
        time.sleep(0.2)
    for sock in held:
        sock.close()
    return tally


def flood_batches(api: Api, tenant: str, until: float, limit: int) -> Counter:
    """flood_batches posts oversized and largest-accepted inference batches as fast as the service answers."""
    job = {"kind": "inference", "name": "flood", "tenant": tenant, "partitions": FLOOD_PARTITIONS,
           "resources": {"cpus": 1, "memory": "1Gi", "gpus": 1, "gpu_type": "t4"},
           "output": f"/tmp/ms-flood-{uuid.uuid4().hex[:8]}", "time_limit": "5m", "command": "true"}
    item = {"spec_text": json.dumps(job)}  # a batch carries each job's text (JSON is YAML)
    bodies = [json.dumps({"jobs": [item] * jobs}).encode() for jobs in (FLOOD_JOBS_PER_BATCH, 1)]
    sent = iter(range(limit))
    return _repeat(lambda: api.send("POST", "/v1/jobs/batch", bodies[next(sent, 0) % 2]), until, limit)


def invented_methods(api: Api, until: float, limit: int) -> Counter:
    """invented_methods sends requests whose methods nobody defined, without a credential."""
    counter = iter(range(limit))
    return _repeat(lambda: api.send(f"X{next(counter, 0):08d}", "/v1/jobs", signed=False), until, limit)


def bad_proofs(api: Api, until: float, limit: int) -> Counter:
    """bad_proofs sends job-side commits for attempts that are not the caller's, with made-up proofs."""
    body = json.dumps({"token": 1, "manifest": {"files": []}, "secret": "not-the-secret"}).encode()
    return _repeat(lambda: api.send("POST", f"/v1/attempts/{uuid.uuid4()}/commit", body), until, limit)


S2_COMMAND = """\
truncate -s 4G "$METASCHED_OUTPUT_DIR/sparse.bin"
mkdir -p "$METASCHED_OUTPUT_DIR/many"
for i in $(seq 1 {files}); do : > "$METASCHED_OUTPUT_DIR/many/f$i"; done
exit 0
"""


def leave_staging(api: Api, tenant: str, output: str, partitions: int, files: int) -> Counter:
    """leave_staging submits one inference job whose partitions leave a huge staging folder uncommitted."""
    job = {"kind": "inference", "name": "staging-bomb", "tenant": tenant, "partitions": partitions,
           "resources": {"cpus": 1, "memory": "1Gi", "gpus": 1, "gpu_type": "a100"}, "output": output,
           "max_parallel": partitions, "time_limit": "10m", "command": S2_COMMAND.format(files=files)}
    return Counter({api.send("POST", "/v1/jobs", json.dumps({"spec": job}).encode()): 1})


def steady(api: Api, tenant: str, until: float, every_s: float) -> Counter:
    """steady submits one small evaluation job every ``every_s`` seconds."""
    body = json.dumps({"spec_text": STEADY_JOB.format(tenant=tenant)}).encode()
    tally: Counter = Counter()
    while time.monotonic() < until:
        tally[api.send("POST", "/v1/jobs", body)] += 1
        time.sleep(every_s)
    return tally


def _repeat(send, until: float, limit: int) -> Counter:
    """_repeat calls ``send`` until the time or the count runs out, counting the statuses."""
    tally: Counter = Counter()
    for _ in range(limit):
        if time.monotonic() >= until:
            break
        tally[send()] += 1
    return tally


def main() -> None:
    """main runs one attack and prints what it sent and how the service answered."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("S1", "S2", "S4", "S8", "S9", "steady"))
    parser.add_argument("--socket", required=True)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--count", type=int, default=2_000, help="S1: connections; others: requests at most")
    parser.add_argument("--tenant", default="tenant-a")
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--output", default="", help="S2: the job's output folder (the user's own)")
    parser.add_argument("--partitions", type=int, default=4, help="S2: partitions of the job")
    args = parser.parse_args()
    api = Api(args.socket)
    until = time.monotonic() + min(args.seconds, 600.0)
    limit = min(args.count, 1_000_000)
    if args.kind == "S1":
        tally = hold_idle(api, limit, until)
    elif args.kind == "S2":
        tally = leave_staging(api, args.tenant, args.output, min(args.partitions, 64), min(limit, 200_000))
    elif args.kind == "S4":
        tally = flood_batches(api, args.tenant, until, limit)
    elif args.kind == "S8":
        tally = invented_methods(api, until, limit)
    elif args.kind == "S9":
        tally = bad_proofs(api, until, limit)
    else:
        tally = steady(api, args.tenant, until, args.every)
    print(json.dumps({"kind": args.kind, "answers": {str(k): v for k, v in tally.items()}}))


if __name__ == "__main__":
    main()
