"""Markdown tables from a results document (what `python -m bench` writes as JSON): one
module per part of the run (service, over_http, retrieval), built of what tables holds;
`render` puts their sections in order."""

from typing import Any

from bench.report.over_http import http_section, many_users_section, profile_section
from bench.report.retrieval import (
    context_section,
    minilm_targets_section,
    replay_targets_section,
    retrieval_section,
)
from bench.report.service import (
    economy_section,
    growth_section,
    recall_targets_section,
    service_section,
    targets_section,
)
from bench.report.tables import table


def machine_section(results: dict[str, Any]) -> str:
    machine = results["machine"]
    rows = [(key, value) for key, value in machine.items()]
    return table(("", ""), rows)


def render(results: dict[str, Any]) -> str:
    sections = [
        "# Taproot benchmark results",
        f"Profile `{results['profile']}`, started {results['started_at']}, command "
        f"`{results['command']}`.",
        "## Machine",
        machine_section(results),
        "## Targets (medians at 10,000 memories)",
        targets_section(results),
        "## Targets of the recall work (issues 12 and 14)",
        recall_targets_section(results),
        "## Targets of the context economy (issue 15)",
        economy_section(results),
        "## Service-level latency (in process)",
        service_section(results),
        "## Growth from 10,000 to 100,000 memories",
        growth_section(results),
        "## Over HTTP (MCP client → uvicorn)",
        http_section(results),
        "## Where a call over HTTP spends its time (profile)",
        profile_section(results),
        "## Retrieval quality (LoCoMo)",
        retrieval_section(results),
        "## Targets of recall under use (issue 20)",
        replay_targets_section(results),
        "## Targets of MiniLM (issue 25)",
        minilm_targets_section(results),
        "## What Claude sees at the start (issue 33)",
        context_section(results),
        "## Many users, a random owner a call (issue 32)",
        many_users_section(results),
    ]
    notes = results.get("notes")
    if notes:
        sections += ["## Notes", "\n".join(f"- {n}" for n in notes)]
    return "\n\n".join(sections) + "\n"
