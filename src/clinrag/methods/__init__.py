"""Answering methods: each is a class with `answer(case) -> Answer`, registered by name."""
