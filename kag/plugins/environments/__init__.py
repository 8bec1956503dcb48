"""RL environments (kind ``environment``): what RL stages train against (kag.core.agent.environment)."""
