"""The patient base: DoctorRAG's experience, EXPRAG's coarse-to-fine retrieval, similar-patient few-shot."""
