"""Configuration: pydantic models for experiments and agent types, and their loader."""
