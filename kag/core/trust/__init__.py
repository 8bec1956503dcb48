"""The trust boundary's machinery: confinement of untrusted processes, signed caches, link-safe files."""
