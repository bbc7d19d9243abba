"""Chat model layer: one contract, an embedded offline default, OpenAI-compatible servers, cache, replay."""

from clinrag.llm.base import ChatModel, ChatRequest, Completion, Message, OptionScores

__all__ = ["ChatModel", "ChatRequest", "Completion", "Message", "OptionScores"]
