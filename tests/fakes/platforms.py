"""Fake Amazon Bedrock and Google Vertex AI endpoints for Claude, each speaking its platform's wire format, with the
scripting, fault injection and responder of the fake Messages API (tests/fakes/anthropic.py) behind it.

Bedrock (InvokeModel, as AWS documents it for Anthropic's models): ``POST /model/{modelId}/invoke``, the model only
in the path, ``anthropic_version`` "bedrock-2023-05-31" in the body, and a SigV4 ``Authorization`` header whose
scope names the region and the service ``bedrock``; the fake recomputes the signature with botocore from the
static test credentials, and rejects a request signed more than five minutes away from now. Errors come in AWS's
shape (``{"message"}`` and ``x-amzn-ErrorType``), without ``retry-after``. No streaming, no batches, no token
counting (the SDK's Bedrock client has none).

Vertex AI (rawPredict, as Google documents it for Claude):
``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`` (and
``count-tokens:rawPredict``), ``anthropic_version`` "vertex-2023-10-16" in the body, the model only in the path, and
an OAuth ``Bearer`` token that this fake minted: its ``/token`` endpoint answers the JWT bearer grant of the service
account key ``adc_file`` writes as Application Default Credentials, so google-auth runs its real flow and no real
cloud (nor a metadata server) is ever asked. Authentication, permission, not-found and quota errors come in Google's shape; the
model's own errors pass through in Anthropic's."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.keys import test_key_pair

BEDROCK_VERSION = "bedrock-2023-05-31"
VERTEX_VERSION = "vertex-2023-10-16"
AWS_ACCESS_KEY = "AKIAFAKEBEDROCKTEST01"
AWS_SECRET_KEY = "fake+secret/key/for+bedrock/tests+only0000"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # a service account's assertion names it, always
MAX_CLOCK_SKEW = 300.0  # AWS refuses a signature dated more than five minutes from its clock
_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z0-9-]+)"
    r"/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})$"
)
_BEDROCK_MODEL = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<name>claude-[a-z0-9.-]+?)-v\d+(?::\d+)?$")
_VERTEX_MODEL = re.compile(r"^(?P<name>claude-[a-z0-9.-]+?)(?:@(?P<date>\d{8}))?$")
_AWS_ERRORS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}
_GOOGLE_STATUS = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}


class FakeBedrock(FakeAnthropic):
    """Bedrock runtime's InvokeModel for Claude. ``model_ids``: the model ids of the requests, as their paths named
    them; ``signed_headers``: the header names each accepted request's signature covered."""

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        access_key: str = AWS_ACCESS_KEY,
        secret_key: str = AWS_SECRET_KEY,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.region = region
        self.access_key = access_key
        self.secret_key = secret_key
        self.model_ids: list[str] = []
        self.signed_headers: list[list[str]] = []
        self._request_ids = itertools.count(1)

    def client_environment(self, tmp_path: Path) -> dict[str, str]:
        """AWS's standard variables with the static test keys (no profile, no metadata server), and this fake's URL."""
        assert self.base_url is not None, "serve() first"
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "ANTHROPIC_BEDROCK_BASE_URL": self.base_url,
        }

    def _is_messages_path(self, path: str) -> bool:
        return path.startswith("/model/") and path.endswith("/invoke")

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/model/{model_id}/invoke", self._handle_messages)
        app.router.add_post("/model/{model_id}/invoke-with-response-stream", self._refuse_stream)

    async def _refuse_stream(self, request: web.Request) -> web.StreamResponse:
        await self._receive(request)
        return self._error(400, "invalid_request_error", "this fake serves InvokeModel only (the app never streams)")

    def _authorize(self, request: web.Request, raw: bytes) -> web.Response | None:
        header = request.headers.get("authorization", "")
        sig = _SIGV4.match(header)
        if sig is None:
            why = "Missing Authentication Token" if not header else "Authorization header is not a SigV4 signature"
            return self._error(403, "IncompleteSignatureException", why)
        amz_date = request.headers.get("x-amz-date", "")
        try:
            signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        except ValueError:
            return self._error(403, "IncompleteSignatureException", "X-Amz-Date is missing or malformed")
        signed = sig["signed"].split(";")
        problem = None
        if sig["key"] != self.access_key:
            problem = "The security token included in the request is invalid."
        elif sig["date"] != amz_date[:8] or sig["service"] != "bedrock" or sig["region"] != self.region:
            problem = (
                f"Credential should be scoped to a valid region ({self.region}), the service bedrock, "
                f"and the date of X-Amz-Date; got {sig['region']}/{sig['service']}/{sig['date']}"
            )
        elif not {"host", "x-amz-date"} <= set(signed):
            problem = "SignedHeaders must cover host and x-amz-date"
        elif abs(time.time() - signed_at) > MAX_CLOCK_SKEW:
            problem = f"Signature expired: {amz_date} is more than 5 minutes from now"
        elif sig["signature"] != self._signature(request, raw, signed, amz_date):
            problem = "The request signature we calculated does not match the signature you provided."
        if problem is not None:
            return self._error(403, "InvalidSignatureException", problem)
        self.signed_headers.append(signed)
        return None

    def _signature(self, request: web.Request, raw: bytes, signed: list[str], amz_date: str) -> str:
        """SigV4 of the request as received, over the headers its signature names, with the fake's secret key."""
        headers = {name: request.headers.get(name, "") for name in signed}
        aws = AWSRequest(
            method=request.method, url=f"http://{request.host}{request.raw_path}", headers=headers, data=raw
        )
        aws.context["timestamp"] = amz_date
        token = request.headers.get("x-amz-security-token")
        signer = SigV4Auth(Credentials(self.access_key, self.secret_key, token), "bedrock", self.region)
        return signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)

    def _platform_body(self, request: web.Request, body: dict[str, Any]) -> tuple[dict[str, Any], web.Response | None]:
        model_id = request.match_info.get("model_id", "")
        model = _BEDROCK_MODEL.match(model_id.rsplit("/", 1)[-1])
        if model is None:
            return body, self._error(400, "invalid_request_error", "The provided model identifier is invalid.")
        if "model" in body:
            return body, self._error(
                400,
                "invalid_request_error",
                "Malformed input request: #: extraneous key [model] is not permitted, please reformat your input",
            )
        if body.get("anthropic_version") != BEDROCK_VERSION:
            return body, self._error(
                400, "invalid_request_error", f"Malformed input request: anthropic_version must be {BEDROCK_VERSION}"
            )
        self.model_ids.append(model_id)
        rest = {k: v for k, v in body.items() if k != "anthropic_version"}
        return {**rest, "model": model["name"]}, None  # the response names the model as Anthropic does

    def _error(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: Any = None,
        error_code: str | None = None,
    ) -> web.Response:
        """AWS's error shape; 529 (Anthropic's overloaded) is Bedrock's 503. No retry-after: Bedrock sends none."""
        status = 503 if status == 529 else status
        kind = error_type if error_type.endswith("Exception") else _AWS_ERRORS.get(status, "InternalServerException")
        request_id = f"fake-bedrock-{next(self._request_ids):06d}"
        return web.json_response(
            {"message": message},
            status=status,
            headers={
                "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                "x-amzn-RequestId": request_id,
            },
        )


class FakeVertex(FakeAnthropic):
    """Vertex AI's rawPredict for Claude, and an OAuth token endpoint for the service account key it writes as
    Application Default Credentials. ``model_ids``: the model of each request as its path named it; ``tokens``: the
    access tokens it minted; ``token_requests``: how often its token endpoint was asked."""

    CLIENT_EMAIL = "reviewer@fake-project-4711.iam.gserviceaccount.com"
    SCOPE = "https://www.googleapis.com/auth/cloud-platform"

    def __init__(self, *, project: str = "fake-project-4711", region: str = "us-east5", **kw: Any) -> None:
        super().__init__(**kw)
        self.project = project
        self.region = region
        self.model_ids: list[str] = []
        self.tokens: set[str] = set()
        self.token_requests = 0
        self._minted = itertools.count(1)
        self._key = test_key_pair("vertex-service-account")

    def adc_file(self, tmp_path: Path) -> Path:
        """A service account key file (Application Default Credentials) whose token endpoint is this fake: google-auth
        signs a JWT with its key and trades it there for an access token (the authorized_user kind always asks
        Google's own endpoint)."""
        assert self.base_url is not None, "serve() first"
        path = tmp_path / "service-account.json"
        path.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": self.project,
                    "private_key_id": "fake-key-1",
                    "private_key": self._key.private_pem,
                    "client_email": self.CLIENT_EMAIL,
                    "client_id": "100000000000000000001",
                    "token_uri": f"{self.base_url}/token",
                }
            )
        )
        return path

    def client_environment(self, tmp_path: Path) -> dict[str, str]:
        """Google's standard variables: the ADC file, the region and project, and this fake's URL (no gcloud
        configuration, no metadata server)."""
        assert self.base_url is not None, "serve() first"
        return {
            "GOOGLE_APPLICATION_CREDENTIALS": str(self.adc_file(tmp_path)),
            "CLOUDSDK_CONFIG": str(tmp_path / "no-gcloud"),
            "NO_GCE_CHECK": "True",
            "CLOUD_ML_REGION": self.region,
            "ANTHROPIC_VERTEX_PROJECT_ID": self.project,
            "ANTHROPIC_VERTEX_BASE_URL": f"{self.base_url}/v1",
        }

    def _is_messages_path(self, path: str) -> bool:
        return path.endswith(":rawPredict") and not path.endswith("/count-tokens:rawPredict")

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post(
            "/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{target}", self._handle_predict
        )
        app.router.add_post("/token", self._handle_token)

    async def _handle_predict(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["target"].rpartition(":")
        if method != "rawPredict":
            await self._receive(request)
            return self._error(400, "invalid_request_error", f"this fake serves rawPredict only, not {method!r}")
        if model == "count-tokens":
            return await self._handle_count_tokens(request)
        return await self._handle_messages(request)

    async def _handle_token(self, request: web.Request) -> web.StreamResponse:
        """OAuth 2.0's JWT bearer grant (RFC 7523), as Google's token endpoint answers a service account: the
        assertion must be signed by the account's key, addressed to Google's token endpoint (whatever URL the key file
        names), asking for the cloud-platform scope."""
        self.token_requests += 1
        form = await request.post()
        try:
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                raise jwt.InvalidTokenError("unsupported grant_type")
            claims = jwt.decode(
                str(form.get("assertion", "")),
                self._key.public_pem,
                algorithms=["RS256"],
                audience=GOOGLE_TOKEN_AUDIENCE,
                issuer=self.CLIENT_EMAIL,
            )
            if self.SCOPE not in str(claims.get("scope", "")).split():
                raise jwt.InvalidTokenError("scope")
        except jwt.InvalidTokenError:
            return web.json_response(
                {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, status=400
            )
        token = f"ya29.fake-{next(self._minted):04d}-{hashlib.sha256(str(time.time()).encode()).hexdigest()[:16]}"
        self.tokens.add(token)
        return web.json_response({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def _authorize(self, request: web.Request, raw: bytes) -> web.Response | None:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[len("Bearer ") :] not in self.tokens:
            return self._error(
                401,
                "authentication_error",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                "other valid authentication credential.",
            )
        if (request.match_info.get("project"), request.match_info.get("location")) != (self.project, self.region):
            return self._error(
                403, "permission_error", f"Permission denied on resource project {request.match_info.get('project')}"
            )
        return None

    def _platform_body(self, request: web.Request, body: dict[str, Any]) -> tuple[dict[str, Any], web.Response | None]:
        model_name, _, _ = request.match_info["target"].rpartition(":")
        counting = model_name == "count-tokens"
        if body.get("anthropic_version") != VERTEX_VERSION:
            return body, self._error(400, "invalid_request_error", f"anthropic_version: must be {VERTEX_VERSION}")
        if counting:
            model_name = str(body.get("model") or "")
        elif "model" in body:
            return body, self._error(400, "invalid_request_error", "model: Extra inputs are not permitted")
        model = _VERTEX_MODEL.match(model_name)
        if model is None:
            return body, self._error(404, "not_found_error", f"Publisher Model `{model_name}` was not found")
        self.model_ids.append(model_name)
        name = f"{model['name']}-{model['date']}" if model["date"] else model["name"]
        rest = {k: v for k, v in body.items() if k != "anthropic_version"}
        return {**rest, "model": name}, None

    def _error(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: Any = None,
        error_code: str | None = None,
    ) -> web.Response:
        """Google's shape for what the platform refuses (credentials, permission, not found, quota); the model's
        other errors pass through as Anthropic shapes them."""
        if status in _GOOGLE_STATUS:
            payload = {"error": {"code": status, "message": message, "status": _GOOGLE_STATUS[status]}}
            return web.json_response(payload, status=status)
        return super()._error(status, error_type, message, headers, error_code)


def fake_for(provider: str) -> FakeAnthropic:
    """The fake endpoint of a model provider (REVIEWER_MODEL_PROVIDER)."""
    return {"anthropic": FakeAnthropic, "bedrock": FakeBedrock, "vertex": FakeVertex}[provider]()


# Variables of the standard chains that would route around a fake (a profile, a Bedrock API key, a gcloud login).
_ROUTING_AROUND = ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK")


@contextlib.contextmanager
def in_client_environment(fake: FakeAnthropic, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The process environment set as the fake's clients need it (AWS's and Google's chains read nothing else), and
    restored after; yields those variables. The Claude API's fake needs none: its key and URL are settings."""
    values = fake.client_environment(tmp_path)
    if type(fake) is FakeAnthropic:
        yield values
        return
    saved = {name: os.environ.get(name) for name in (*values, *_ROUTING_AROUND)}
    for name in _ROUTING_AROUND:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield values
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
