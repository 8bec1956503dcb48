"""Anti-reward-hacking guards (issue 4): one module per guard, each registered under its name."""

GUARD_MODULES: tuple[str, ...] = (
    "kag.plugins.guards.torch_fallback",
    "kag.plugins.guards.provenance",
    "kag.plugins.guards.output_reuse",
    "kag.plugins.guards.hidden_work",
    "kag.plugins.guards.tampering",
    "kag.plugins.guards.precision",
)
