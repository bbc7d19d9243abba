"""The statement knowledge base: DoctorRAG's expertise."""
