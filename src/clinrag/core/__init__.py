"""Data model, typed errors and settings shared by every layer."""
