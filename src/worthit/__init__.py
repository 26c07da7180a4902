"""worthit: is this worth buying? A grounded verdict first, an explanation after."""

__version__ = "0.1.0"
