"""jepa_core: train JEPA models and make their failures visible early."""

__version__ = "0.1.0"
