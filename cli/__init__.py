"""cli: the command-line programs, ``metasched`` and the Slurm-habit ``msbatch``, ``msqueue``, ``mscancel``.

One module per command group (``*_cmd.py``, wired in ``main``); the sbatch, squeue and scancel
emulation lives in ``cli/sbatch/``. On the API path the CLI is a thin client (standard library
only: ``client``, ``remote``, ``credentials``) that sends one MUNGE-authenticated request per
command; ``local`` runs the same operations on the store for root's local mode, and ``serve``,
``simulate`` and ``db`` load the full install lazily. Nothing else in the project imports ``cli``.
"""
