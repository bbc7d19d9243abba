"""Task kinds: prompts and output parsers, shared by every method."""
