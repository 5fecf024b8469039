"""Shared interfaces on the ground floor: what every package may rely on (stdlib only)."""
