"""The settings of the model: where Claude is reached (docs/configuration.md, "Model providers"), which models, and
how much of it one review may use. Part of the table in `reviewer_app/settings/table.py`."""

from __future__ import annotations

from reviewer_app.settings.setting import Setting

MODEL_SETTINGS: tuple[Setting, ...] = (
    Setting("ANTHROPIC_API_KEY", "anthropic_api_key", str, "", "Claude API key", secret=True),
    Setting("ANTHROPIC_BASE_URL", "anthropic_base_url", str, "", "Messages API base URL (read by the SDK too)"),
    # Where Claude is reached (docs/configuration.md, "Model providers"); credentials stay with each platform's chain.
    Setting("REVIEWER_MODEL_PROVIDER", "model_provider", str, "anthropic", "anthropic, bedrock or vertex"),
    Setting("ANTHROPIC_CUSTOM_HEADERS", "model_headers", str, "", "'Name: value' lines for a gateway", secret=True),
    Setting("AWS_REGION", "aws_region", str, "", "Bedrock's AWS region (else AWS_DEFAULT_REGION, the profile's)"),
    Setting("ANTHROPIC_BEDROCK_BASE_URL", "bedrock_base_url", str, "", "Bedrock runtime base URL (a gateway's)"),
    Setting("CLOUD_ML_REGION", "vertex_region", str, "", "Vertex AI region of Claude (required on vertex)"),
    Setting("ANTHROPIC_VERTEX_PROJECT_ID", "vertex_project_id", str, "", "Vertex AI project (else the credentials')"),
    Setting("ANTHROPIC_VERTEX_BASE_URL", "vertex_base_url", str, "", "Vertex AI base URL (a gateway's)"),
    Setting("REVIEWER_MODEL", "model", str, "", "Claude model that writes the reviews (default: the provider's)"),
    Setting(
        "REVIEWER_MAX_INPUT_TOKENS", "max_input_tokens", int, 60000, "token budget of one model request", minimum=2000
    ),
    Setting(
        "REVIEWER_MAX_OUTPUT_TOKENS", "max_output_tokens", int, 4096, "max tokens of the model's answer", minimum=256
    ),
    Setting(
        "REVIEWER_MAX_PARTS",
        "max_parts",
        int,
        3,
        "model requests one review may use for a large PR",
        minimum=1,
        maximum=20,
    ),
    Setting(
        "REVIEWER_MODEL_TIMEOUT_SECONDS",
        "model_timeout_seconds",
        float,
        300.0,
        "timeout of one model request",
        minimum=1,
    ),
    Setting(
        "REVIEWER_MALFORMED_RETRIES",
        "malformed_retries",
        int,
        2,
        "re-asks after a malformed model answer",
        minimum=0,
        maximum=5,
    ),
    Setting(
        "REVIEWER_REPOSITORY_TOOLS",
        "repository_tools",
        bool,
        False,
        "let the model read the repository (read-only, at the head commit) before it submits, for repositories whose .github/reviewer.yml does not say",
    ),
    Setting(
        "REVIEWER_VERIFY",
        "verify",
        bool,
        True,
        "check each review's findings in a second model call before publishing (refuted and unconfident ones are withheld), for repositories whose .github/reviewer.yml does not say",
    ),
    Setting(
        "REVIEWER_VERIFY_MODEL",
        "verify_model",
        str,
        "",
        "Claude model of the verification pass (default: the provider's, a cheaper one than REVIEWER_MODEL)",
    ),
    Setting(
        "REVIEWER_MAX_TOOL_TURNS",
        "max_tool_turns",
        int,
        3,
        "turns of repository tool calls one review request may use (0: tools off everywhere)",
        minimum=0,
        maximum=10,
    ),
    Setting(
        "REVIEWER_MAX_TOOL_BYTES",
        "max_tool_bytes",
        int,
        20000,
        "bytes of repository tool output per turn",
        minimum=1000,
        maximum=200000,
    ),
)
