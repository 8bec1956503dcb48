"""kag's core: the code every run needs. No concrete choices live here: those are plugins."""
