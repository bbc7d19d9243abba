"""clinrag: doctor-like medical reasoning over knowledge and experience."""

__version__ = "0.1.0"
