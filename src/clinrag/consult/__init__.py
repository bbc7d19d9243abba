"""Grounded consultation: findings from the patient's words, then a differential, questions and an answer."""
