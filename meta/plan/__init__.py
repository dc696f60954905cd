"""Capacity planning from the site's own history."""
