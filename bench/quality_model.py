"""The model side of bench/review_quality.py: a Messages API endpoint on loopback that the whole app talks to, answering
each request from a recording keyed by the request's hash (replay), or from the real API when ANTHROPIC_API_KEY is set
(and then recording the answer), or, with ``record_missing``, dumping a request nobody has answered yet to
``pending/`` and answering it with an empty answer so the run goes on.

A recording is one JSON file per request, ``<hash>.json``: what kind of request it was (review, verify, judge), the case,
the model asked, the tool input it answers with (or text), its usage and who answered (``api``, or ``stand-in`` for a
person or session answering the exact request as the model would). Stand-in usage is an estimate (characters / 4 of
the request and of the answer); API usage is the API's."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.anthropic import prompt_cache_split

REVIEW_MODEL = "claude-sonnet-4-5"  # the models the bench's app is configured with, and the judge's
VERIFY_MODEL = "claude-haiku-4-5"
JUDGE_MODEL = "claude-sonnet-4-5"
REVIEW_TOOL = "submit_review"
VERIFY_TOOL = "submit_verdicts"
JUDGE_TOOL = "submit_matches"
CALLS = "calls"  # an answer {"calls": [{"name": ..., "input": {...}}]} is a turn of tool calls, not a submission
KINDS = {REVIEW_TOOL: "review", VERIFY_TOOL: "verify", JUDGE_TOOL: "judge"}
EMPTY = {
    REVIEW_TOOL: {"summary": "(no recorded answer)", "comments": []},
    VERIFY_TOOL: {"verdicts": []},
    JUDGE_TOOL: {"matches": []},
}


def _strip(value: Any, *, ids: bool = False) -> Any:
    """``value`` without cache marks (where they go depends on token counts, not on what is asked), and with ``ids``
    without tool-call ids (the API's are random, a replay's fixed; the order pairs calls and results)."""
    if isinstance(value, dict):
        drop = {"cache_control"}
        if ids:
            drop |= {"tool_use_id"} | ({"id"} if value.get("type") == "tool_use" else set())
        return {k: _strip(v, ids=ids) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip(v, ids=ids) for v in value]
    return value


def request_hash(body: dict[str, Any]) -> str:
    """The request's key: its model, system prompt, tools, tool choice and messages, without cache marks (and without
    tool-call ids)."""
    keep = {k: _strip(body.get(k), ids=True) for k in ("model", "system", "tools", "tool_choice", "messages")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def forced_tool(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return str(choice.get("name") or "")
    tools = body.get("tools") or []
    return str(tools[0].get("name")) if tools else ""


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def transcript(body: dict[str, Any]) -> str:
    """The request's messages as a person reads them: each text, each tool call the model made and each tool result."""
    out: list[str] = []
    for message in body.get("messages") or []:
        role, content = message.get("role", "user"), message.get("content")
        if isinstance(content, str):
            out.append(content if role == "user" else f"[{role}]\n{content}")
            continue
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                out.append(block.get("text", "") if role == "user" else f"[{role}]\n{block.get('text', '')}")
            elif kind == "tool_use":
                out.append(f"[you called {block.get('name')}] {json.dumps(block.get('input'), ensure_ascii=False)}")
            elif kind == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else text_of(inner)
                out.append(f"[tool result{' (error)' if block.get('is_error') else ''}]\n{text}")
    return "\n\n".join(out)


def estimated_usage(body: dict[str, Any], answer: Any) -> dict[str, int]:
    """A stand-in's usage: the request's and the answer's JSON characters / 4 (real tokenizers average about four
    characters per token on English and code)."""
    asked = json.dumps(_strip({k: body.get(k) for k in ("system", "tools", "messages")}), ensure_ascii=False)
    return {
        "input_tokens": math.ceil(len(asked) / 4),
        "output_tokens": max(1, math.ceil(len(json.dumps(answer, ensure_ascii=False)) / 4)),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


@dataclass
class ModelSide:
    """Answers Messages requests from recordings (or the API), and keeps what it answered for the report."""

    recordings: Path
    live: Any = None  # an anthropic.AsyncAnthropic when ANTHROPIC_API_KEY is set
    record_missing: bool = False
    pending: Path | None = None  # where unanswered requests go (default: <recordings>/pending)
    label: str = ""  # who a stand-in is (written into its recordings with --by)
    case: str = ""  # the case being reviewed, written into pending requests and new recordings
    config: str = ""  # the configuration it is reviewed under (bench/review_quality.py CONFIGS), likewise
    answered: list[dict[str, Any]] = field(default_factory=list)  # this case's recordings used, in order
    missing: list[str] = field(default_factory=list)  # hashes of requests without a recording (this case)
    used: set[str] = field(default_factory=set)  # every recording used in this run
    cached: set[str] = field(default_factory=set)  # the prompt prefixes this review's requests wrote to the cache

    def start_case(self, case: str, config: str = "") -> None:
        self.case, self.config, self.answered, self.missing = case, config, [], []
        self.cached = set()

    def path(self, key: str) -> Path:
        return self.recordings / f"{key}.json"

    @property
    def pending_dir(self) -> Path:
        return self.pending if self.pending is not None else self.recordings / "pending"

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Messages API's answer to ``body``."""
        key = request_hash(body)
        tool = forced_tool(body)
        recording = self._read(key)
        if recording is None and self.live is not None:
            recording = await self._ask_live(key, body, tool)
        if recording is None:
            self.missing.append(key)
            if self.record_missing:
                self._dump(key, body, tool)
            return _message(body, tool, EMPTY.get(tool, {}), {"input_tokens": 1, "output_tokens": 1}, key)
        if recording.get("by") == "stand-in":
            recording = {**recording, "usage": self._cached_usage(body, recording["usage"])}
        self.answered.append(recording)
        self.used.add(key)
        return _message(body, tool, recording["answer"], recording["usage"], key)

    def _cached_usage(self, body: dict[str, Any], usage: dict[str, int]) -> dict[str, int]:
        """A stand-in's estimated input tokens split as the API's prompt cache would have split them within this review
        (the app marks its system prompt, shared blocks and each tool turn's history for caching; a stand-in's
        recording counts every request's whole prompt as new input): the same total, in the shares the fake API's
        cache model (tests/fakes/anthropic.py) gives the request's cache marks."""
        total, created, read = prompt_cache_split(body, self.cached)
        estimated = int(usage.get("input_tokens") or 0) + int(usage.get("cache_creation_input_tokens") or 0)
        estimated += int(usage.get("cache_read_input_tokens") or 0)
        if not total or not estimated:
            return usage
        read_tokens, created_tokens = round(estimated * read / total), round(estimated * created / total)
        return {
            **usage,
            "input_tokens": estimated - read_tokens - created_tokens,
            "cache_creation_input_tokens": created_tokens,
            "cache_read_input_tokens": read_tokens,
        }

    def _read(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        return json.loads(path.read_text()) if path.exists() else None

    async def _ask_live(self, key: str, body: dict[str, Any], tool: str) -> dict[str, Any]:
        response = await self.live.messages.create(**body)
        calls = [b for b in response.content if b.type == "tool_use"]
        call = next((b for b in calls if b.name == tool), None)
        if call is not None:
            answer = call.input
        elif calls:  # a turn of the repository tools: the calls, answered by the app's tools on the next request
            answer = {CALLS: [{"name": b.name, "input": b.input} for b in calls]}
        else:
            answer = text_of([b.model_dump() for b in response.content])
        usage = response.usage.model_dump()
        recording = self._recording(key, body, tool, answer, {k: usage.get(k) or 0 for k in _USAGE}, by="api")
        self.path(key).write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
        return recording

    def _recording(
        self, key: str, body: dict[str, Any], tool: str, answer: Any, usage: dict[str, int], *, by: str
    ) -> dict[str, Any]:
        return {
            "hash": key,
            "kind": KINDS.get(tool, tool),
            "case": self.case,
            **({"config": self.config} if self.config else {}),
            "model": body.get("model"),
            "answer": answer,
            "usage": usage,
            "by": by,
            **({"stand_in": self.label} if by == "stand-in" and self.label else {}),
        }

    def _dump(self, key: str, body: dict[str, Any], tool: str) -> None:
        pending = self.pending_dir
        pending.mkdir(parents=True, exist_ok=True)
        system = body.get("system")
        request = {
            "hash": key,
            "kind": KINDS.get(tool, tool),
            "case": self.case,
            **({"config": self.config} if self.config else {}),
            "model": body.get("model"),
            "tool": tool,
            "system": system if isinstance(system, str) else text_of(system),
            "user": transcript(body),
            "tools": [{k: t.get(k) for k in ("name", "description", "input_schema")} for t in body.get("tools") or []],
            "body": _strip(body),
        }
        (pending / f"{key}.json").write_text(json.dumps(request, indent=1, ensure_ascii=False) + "\n")

    def unused(self) -> list[Path]:
        """Recordings this run did not use (left by requests that changed): ``--prune`` deletes them."""
        return sorted(p for p in self.recordings.glob("*.json") if p.stem not in self.used)

    def save_answer(self, key: str, answer: Any) -> Path:
        """A stand-in's answer to the pending request ``key``, saved as its recording (usage estimated)."""
        pending = json.loads((self.pending_dir / f"{key}.json").read_text())
        self.case, self.config = pending["case"], pending.get("config", "")
        usage = estimated_usage(pending["body"], answer)
        recording = self._recording(key, pending["body"], pending["tool"], answer, usage, by="stand-in")
        path = self.path(key)
        path.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
        (self.pending_dir / f"{key}.json").unlink()
        return path

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        return app

    async def _messages(self, request: web.Request) -> web.Response:
        return web.json_response(await self.answer(await request.json()))

    async def _count(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.live is not None:
            counted = await self.live.messages.count_tokens(
                **{k: v for k, v in body.items() if k in ("model", "system", "tools", "messages")}
            )
            return web.json_response({"input_tokens": counted.input_tokens})
        return web.json_response({"input_tokens": estimated_usage(body, "")["input_tokens"]})


_USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _message(body: dict[str, Any], tool: str, answer: Any, usage: dict[str, int], key: str) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if isinstance(answer, str):
        content, stop = [{"type": "text", "text": answer}], "end_turn"
    elif isinstance(answer, dict) and set(answer) == {CALLS}:  # a tool turn: ids fixed by the request, for replay
        content = [
            {"type": "tool_use", "id": f"toolu_{key[:16]}_{i}", "name": c["name"], "input": c.get("input") or {}}
            for i, c in enumerate(answer[CALLS])
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "tool_use", "id": "toolu_recorded", "name": tool, "input": answer}], "tool_use"
    return {
        "id": "msg_recorded",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {k: int(usage.get(k) or 0) for k in _USAGE},
    }
