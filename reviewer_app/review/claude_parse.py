"""The review in a model's Message, strictly checked against the review tool's schema; and what the model is told
when its tool call does not fit it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from reviewer_app.core.review_model import ModelAnswer, ModelComment, Side
from reviewer_app.review.prompt import REVIEW_TOOL_NAME

if TYPE_CHECKING:
    from anthropic.types import Message

_MAX_FEEDBACK_CHARS = 1_000
T = TypeVar("T")


class MalformedAnswer(ValueError):
    """The model's answer does not fit the review tool's schema; the message says where."""


def usage_dict(usage: Any) -> dict[str, int]:
    """A Message's token counts as plain numbers (a checkpointed tool turn, an answer's usage)."""
    return {
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens or 0,
        "cache_read_input_tokens": usage.cache_read_input_tokens or 0,
    }


def answer_from(response: Message) -> ModelAnswer:
    """The review in a model's Message (a batch's answer), strictly checked; raises MalformedAnswer."""
    summary, comments = parse_review(response)
    usage = usage_dict(response.usage)
    return ModelAnswer(
        summary=summary,
        comments=comments,
        model=str(response.model),
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_creation_input_tokens=usage["cache_creation_input_tokens"],
        cache_read_input_tokens=usage["cache_read_input_tokens"],
    )


def parse_review(response: Message) -> tuple[str, tuple[ModelComment, ...]]:
    """The summary and comments of the review tool call in ``response``, strictly checked."""
    calls = [b for b in response.content if b.type == "tool_use"]
    if not calls:
        raise MalformedAnswer(f"no {REVIEW_TOOL_NAME} tool call in the answer (stop_reason={response.stop_reason})")
    call = next((c for c in calls if c.name == REVIEW_TOOL_NAME), calls[0])
    if call.name != REVIEW_TOOL_NAME:
        raise MalformedAnswer(f"called tool {call.name!r} instead of {REVIEW_TOOL_NAME!r}")
    if response.stop_reason == "max_tokens":
        raise MalformedAnswer("the answer was cut off at max_tokens; keep the review shorter")
    return parse_review_input(call.input)


def parse_tool_answer(response: Message, tool_name: str, parse: Callable[[Any], T]) -> T:
    """``parse`` of the input of the ``tool_name`` call in ``response``; raises MalformedAnswer."""
    call = next((b for b in response.content if b.type == "tool_use" and b.name == tool_name), None)
    if call is None:
        raise MalformedAnswer(f"no {tool_name} tool call in the answer (stop_reason={response.stop_reason})")
    if response.stop_reason == "max_tokens":
        raise MalformedAnswer("the answer was cut off at max_tokens; keep it shorter")
    return parse(call.input)


def parse_review_input(data: object) -> tuple[str, tuple[ModelComment, ...]]:
    """Check the tool input against the review schema; unknown keys are ignored (there is no verdict field)."""
    if not isinstance(data, dict):
        raise MalformedAnswer("the tool input must be an object")
    summary = data.get("summary")
    if not isinstance(summary, str):
        raise MalformedAnswer("summary is required and must be a string")
    raw_comments = data.get("comments")
    if not isinstance(raw_comments, list):
        raise MalformedAnswer("comments is required and must be a list")
    return summary.strip(), tuple(_parse_comment(i, c) for i, c in enumerate(raw_comments))


def _parse_comment(i: int, raw: object) -> ModelComment:
    where = f"comments[{i}]"
    if not isinstance(raw, dict):
        raise MalformedAnswer(f"{where} must be an object")
    path, line, body = raw.get("path"), raw.get("line"), raw.get("body")
    side = raw.get("side", "RIGHT")
    severity = raw.get("severity")
    if not isinstance(path, str) or not path.strip():
        raise MalformedAnswer(f"{where}.path must be a non-empty string")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise MalformedAnswer(f"{where}.line must be an integer >= 1")
    if not isinstance(body, str) or not body.strip():
        raise MalformedAnswer(f"{where}.body must be a non-empty string")
    if side is None:
        side = "RIGHT"
    if side not in ("RIGHT", "LEFT"):
        raise MalformedAnswer(f'{where}.side must be "RIGHT" or "LEFT"')
    if severity is not None and not isinstance(severity, str):
        raise MalformedAnswer(f"{where}.severity must be a string")
    suggestion, start_line = raw.get("suggestion"), raw.get("start_line")
    if suggestion is not None and not isinstance(suggestion, str):
        raise MalformedAnswer(f"{where}.suggestion must be a string")
    if start_line is not None and (not isinstance(start_line, int) or isinstance(start_line, bool) or start_line < 1):
        raise MalformedAnswer(f"{where}.start_line must be an integer >= 1")
    quote, failure = raw.get("quote"), raw.get("failure")
    if quote is not None and not isinstance(quote, str):
        raise MalformedAnswer(f"{where}.quote must be a string")
    if failure is not None and not isinstance(failure, str):
        raise MalformedAnswer(f"{where}.failure must be a string")
    checked_side: Side = "LEFT" if side == "LEFT" else "RIGHT"
    # An unknown severity is kept as a warning (severity_of), not refused: the text is what matters.
    return ModelComment(
        path=path,
        line=line,
        body=body.strip(),
        side=checked_side,
        severity=severity,
        suggestion=suggestion,
        start_line=start_line,
        # Without a quote (the schema asks for one; a batch sent by an older version did not) the finding is not
        # checked against the code, only verified.
        quote=quote,
        failure=failure.strip() if failure else None,
    )


def feedback_turns(response: Message, problem: str, tool_name: str = REVIEW_TOOL_NAME) -> list[dict[str, Any]]:
    """The turns that tell the model what was wrong with its tool call, so the next try can fix it.

    Without a tool call there is nothing to answer; the original request is simply sent again.
    """
    calls = [b for b in response.content if b.type == "tool_use"]
    if not calls:
        return []
    assistant = [{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input} for b in calls]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": b.id,
            "is_error": True,
            "content": f"Invalid {tool_name} input: {problem[:_MAX_FEEDBACK_CHARS]}. "
            f"Call {tool_name} again with input that matches its schema.",
        }
        for b in calls
    ]
    return [{"role": "assistant", "content": assistant}, {"role": "user", "content": results}]
