"""Rendering of result objects: rich tables for people, JSON for machines. No arithmetic here."""
