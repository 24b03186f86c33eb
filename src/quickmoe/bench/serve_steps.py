"""The server's own view of a `bench serve` level: its step counters on /metrics read before and after the level.

A quickmoe server times its engine steps (executor/step_timer.py) and exports running sums (server/metrics.py):
steps, tokens and device seconds by step kind, the device's idle seconds between steps while it had work (waiting
for the host) and the host's seconds queueing steps. The difference over a level gives the device time per step
of each kind, the mean batch of the decode steps and the share of the busy time the device waited for the host:
whether the level was bound by the device or by the host, without a profiler. Another server (no such counters)
gives None and the report leaves the line out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["level_steps", "parse_step_counters", "scrape_step_counters", "steps_line"]

_PREFIX = "quickmoe:"
_BY_KIND = {"engine_steps_total": "steps", "engine_step_tokens_total": "tokens",
            "engine_step_device_seconds_total": "device_s"}
_TOTALS = {"engine_device_idle_seconds_total": "idle_s", "engine_step_host_seconds_total": "host_s"}


def parse_step_counters(text: str) -> dict[str, Any] | None:
    """The step counters of a /metrics page (summed over model names), or None when it has none."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, Any] = {"steps": {}, "tokens": {}, "device_s": {}, "idle_s": 0.0, "host_s": 0.0}
    seen = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith(_PREFIX):
                continue
            stem = sample.name[len(_PREFIX):]
            if stem in _BY_KIND:
                table = found[_BY_KIND[stem]]
                kind = sample.labels.get("kind", "")
                table[kind] = table.get(kind, 0.0) + sample.value
                seen = True
            elif stem in _TOTALS:
                found[_TOTALS[stem]] += sample.value
                seen = True
    return found if seen else None


async def scrape_step_counters(client, root: str, headers: dict[str, str]) -> dict[str, Any] | None:
    """GET {root}/metrics and parse its step counters; None when the server has no such page or counters."""
    try:
        response = await client.get(f"{root}/metrics", headers=headers)
    except Exception:  # noqa: BLE001 - any transport failure means the server's view is not available
        return None
    if response.status_code != 200:
        return None
    try:
        return parse_step_counters(response.text)
    except ValueError:  # not the Prometheus text format: another server's page
        return None


def level_steps(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the server did between two scrapes: per step kind the steps, tokens and mean device ms per step;
    over all steps the device's idle share of the busy time and the host's mean ms to queue a step."""
    if before is None or after is None:
        return None
    by_kind = {}
    for kind in sorted(after["steps"]):
        steps = after["steps"][kind] - before["steps"].get(kind, 0.0)
        if steps <= 0:
            continue
        tokens = after["tokens"].get(kind, 0.0) - before["tokens"].get(kind, 0.0)
        device_s = after["device_s"].get(kind, 0.0) - before["device_s"].get(kind, 0.0)
        by_kind[kind] = {"steps": int(round(steps)), "tokens": int(round(tokens)),
                         "device_ms_per_step": 1e3 * device_s / steps, "tokens_per_step": tokens / steps}
    steps = sum(k["steps"] for k in by_kind.values())
    if not steps:
        return None
    device_s = sum(after["device_s"].values()) - sum(before["device_s"].values())
    idle_s = after["idle_s"] - before["idle_s"]
    host_s = after["host_s"] - before["host_s"]
    busy_s = device_s + idle_s
    return {"by_kind": by_kind, "steps": steps, "device_s": device_s, "device_idle_s": idle_s,
            "device_idle_fraction": idle_s / busy_s if busy_s > 0 else 0.0, "host_ms_per_step": 1e3 * host_s / steps}


def steps_line(level: dict[str, Any] | None) -> str | None:
    """One line for the level's report, or None."""
    if level is None:
        return None
    kinds = "; ".join(f"{kind} {k['steps']} steps of {k['tokens_per_step']:.1f} tokens, {k['device_ms_per_step']:.3f} "
                      f"ms of device time each" for kind, k in level["by_kind"].items())
    return (f"server steps (mean): {kinds}; device idle between steps {100 * level['device_idle_fraction']:.1f}% of "
            f"the busy time (waiting for the host); host {level['host_ms_per_step']:.3f} ms to queue a step")
