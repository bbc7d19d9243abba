"""Tests of the grounded consultation."""
