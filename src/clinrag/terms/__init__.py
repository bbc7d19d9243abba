"""Terminology: ICD-10 chapters, the HPO terms and disease annotations, the MeSH descriptor index and the
name → descriptor mapper."""
