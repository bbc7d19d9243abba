"""Knowledge-source readers, one module per format; each registers its `SourceFormat` in
`clinrag.knowledge.formats.SOURCES` when imported."""
