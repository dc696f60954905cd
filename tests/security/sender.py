"""A flood sender run AS a dev user (``runuser -u mallory -- /usr/bin/python3 sender.py ...``): standard library only.

It sends many requests over the API's Unix socket on one kept-alive connection (a new one when
the service closes it) and prints ``{"statuses": {code: count}, "seconds": s}`` as JSON. With
``--methods PREFIX`` each request's method is ``PREFIX<i>`` (invented, no credential); with
``--credentials FILE`` each request carries the next credential of the file (one per line).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import time
from collections import Counter


class UnixConnection(http.client.HTTPConnection):
    """UnixConnection is an HTTP connection over a Unix socket."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        """connect opens the Unix socket."""
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def main() -> None:
    """main sends the requests and prints what came back."""
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("target")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--methods", default=None, help="invent methods PREFIX0, PREFIX1, ...")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--credentials", default=None)
    parser.add_argument("--body", default="")
    args = parser.parse_args()
    credentials = open(args.credentials).read().split() if args.credentials else []
    count = len(credentials) if credentials else args.count
    statuses: Counter[int] = Counter()
    connection = UnixConnection(args.socket)
    started = time.monotonic()
    for i in range(count):
        method = f"{args.methods}{i}" if args.methods else args.method
        headers = {"Content-Type": "application/json"}
        if credentials:
            headers["Authorization"] = f"MUNGE {credentials[i]}"
        try:
            connection.request(method, args.target, body=args.body.encode() or None, headers=headers)
            response = connection.getresponse()
            response.read()
            statuses[response.status] += 1
        except (OSError, http.client.HTTPException):
            statuses[0] += 1
            connection.close()
            connection = UnixConnection(args.socket)
    json.dump({"statuses": statuses, "seconds": time.monotonic() - started}, sys.stdout)


if __name__ == "__main__":
    main()
