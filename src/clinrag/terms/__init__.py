"""Terminology: ICD-10 chapters, the MeSH descriptor index and the name → descriptor mapper."""
