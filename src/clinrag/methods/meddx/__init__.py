"""MEDDxAgent: interactive differential diagnosis — patients that answer questions (a structured one for coded
datasets), and the experience-driven questioning policy."""
