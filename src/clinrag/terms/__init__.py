"""Terminology: ICD-10 chapters (and later MeSH)."""
