"""The web view: read-only, server-rendered pages served by the API service (issue 16).

``tokens`` signs and checks login links and session cookies, ``auth`` issues and redeems them,
``data`` reads what the pages show, ``render`` and ``pages`` turn it into HTML (f-strings, every
value escaped), ``routes`` serves them. A browser has no MUNGE credential: ``metasched web``
(MUNGE-authenticated) asks for a short-lived signed login link, and opening it sets a signed
session cookie naming the uid MUNGE proved. Rights are resolved per request from Slurm's
associations, exactly as for the JSON API.
"""
