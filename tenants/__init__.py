"""tenants package."""
