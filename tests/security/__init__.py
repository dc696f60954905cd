"""The security suite: issue 22's findings S1-S15 reproduced as real users on the dev cluster."""
